package luabound

import "github.com/yuin/gopher-lua/ast"

// Copies of what Redis answered. A value read from Redis has no size the script's input
// bounds, so the model cannot charge its copies by their length; the proxy charges them at run
// time instead (meter.go: the Lua heap and the time, checked on every loop step, function call
// and Redis call; each call's arguments against a budget of bytes). Between two such checks,
// straight-line code may still copy: a loop-free chain of b = a .. a doubles a value on each
// line, 20 lines a 1 KiB value to a GiB. So the model counts, for each place the script reads
// from Redis, the copies that concatenations and the script's reply make of its values, as
// many as each holds (a .. a holds two), and refuses a place copied more than maxCopies times.

// maxCopies is the most copies a script may make of the values it reads at one place.
const maxCopies = 16

// copied counts a copy, made here (n, what says which), of every value read from Redis that z
// holds.
func (w *walker) copied(n ast.PositionHolder, z size, what string) {
	if w.pass != 2 {
		return
	}
	for _, r := range z.replies {
		var place *frame
		if len(r.at) > 0 {
			place = r.at[len(r.at)-1]
		}
		w.copies[place] += r.n
		if c := w.copies[place]; c > maxCopies {
			w.fail(n, "%s makes the script's copies of a value read from Redis %.0f (more than %d): each copy takes as much of its master's memory as the value", what, c, maxCopies)
		}
	}
}
