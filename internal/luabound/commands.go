package luabound

import (
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"
)

// Redis calls by command class. Most commands cost a master about as much whatever the data
// (O(1) or O(log N)): callUnits. A command that reads a whole value, or many keys, costs as
// much as the value is large, which no script input bounds: such a call costs walkUnits,
// so that a script makes only a handful of them (Budget/walkUnits = 16 without fuel, and
// app_script_fuel/walkUnits fueled), and none on each element of a reply (a walk the cost model
// charges to the reply) or of a loop only the fuel bounds. Deleting and trimming are not in
// the class: they free what earlier writes built, each element once.
//
// KEYS is refused: it walks the whole keyspace. A command named by a value (redis.call(ARGV[1],
// ...)) could be any of them, and costs walkUnits too; only KEYS by that name is refused.

// walkUnits is what a call of a command that walks a whole value costs.
const walkUnits = 1 << 20

// walkers are the commands whose time grows with a value's size or with the keyspace.
var walkers = map[string]bool{
	"smembers": true, "sunion": true, "sinter": true, "sdiff": true, "sunionstore": true,
	"sinterstore": true, "sdiffstore": true, "sintercard": true,
	"hgetall": true, "hkeys": true, "hvals": true,
	"lrem": true, "lindex": true, "lset": true, "linsert": true, "lpos": true,
	"zunion": true, "zinter": true, "zdiff": true, "zunionstore": true, "zinterstore": true,
	"zdiffstore": true, "zintercard": true,
	"sort": true, "sort_ro": true, "scan": true, "sscan": true, "hscan": true, "zscan": true,
	"dump": true, "restore": true, "copy": true, "rename": true, "renamenx": true,
	"bitcount": true, "bitop": true, "bitpos": true, "getrange": true,
	"pfcount": true, "pfmerge": true,
	"georadius": true, "georadiusbymember": true, "georadius_ro": true, "georadiusbymember_ro": true,
	"geosearch": true, "geosearchstore": true,
	"xrange": true, "xrevrange": true, "xread": true, "xreadgroup": true, "xautoclaim": true,
	"xinfo": true, "xpending": true,
	"memory": true,
	"lrange": true, "zrange": true, "zrevrange": true, "zrangestore": true,
	"zrangebyscore": true, "zrevrangebyscore": true, "zrangebylex": true, "zrevrangebylex": true,
}

// ranged are the walkers that read a range given by two indexes after the key (start, stop):
// with both literal and at most maxRange apart, from the same end, they are ordinary calls.
var ranged = map[string]bool{"lrange": true, "zrange": true, "zrevrange": true}

// limited are the walkers that read at most LIMIT's count, when it is a literal.
var limited = map[string]bool{
	"zrangebyscore": true, "zrevrangebyscore": true, "zrangebylex": true, "zrevrangebylex": true,
	"zrange": true, "zrangestore": true,
}

// maxRange is the widest literal range that is an ordinary call.
const maxRange = 1024

// redisCall is what a call of command name (nil: named by a value) with args costs, and why
// it is refused ("": it is not).
func redisCall(name ast.Expr, args []ast.Expr) (float64, string) {
	c, ok := name.(*ast.StringExpr)
	if !ok {
		return walkUnits, ""
	}
	cmd := strings.ToLower(c.Value)
	switch {
	case cmd == "keys":
		return 0, "KEYS, which walks the whole keyspace"
	case !walkers[cmd]:
		return callUnits, ""
	case ranged[cmd] && len(args) >= 3 && narrow(args[1], args[2]):
		return callUnits, ""
	case limited[cmd] && literalLimit(args):
		return callUnits, ""
	}
	return walkUnits, ""
}

// narrow says whether start and stop are literal indexes from the same end, at most maxRange
// apart.
func narrow(start, stop ast.Expr) bool {
	a, ok1 := index(start)
	b, ok2 := index(stop)
	return ok1 && ok2 && (a < 0) == (b < 0) && b-a <= maxRange
}

// index is a literal integer, maybe negative.
func index(e ast.Expr) (int, bool) {
	neg := false
	if m, ok := e.(*ast.UnaryMinusOpExpr); ok {
		e, neg = m.Expr, true
	}
	var text string
	switch v := e.(type) {
	case *ast.NumberExpr:
		text = v.Value
	case *ast.StringExpr:
		text = v.Value
	default:
		return 0, false
	}
	n, err := strconv.Atoi(text)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// literalLimit says whether args hold LIMIT offset count with a literal count in 0..maxRange
// and a literal offset no larger (a large offset is walked too).
func literalLimit(args []ast.Expr) bool {
	for i, a := range args {
		if s, ok := a.(*ast.StringExpr); ok && strings.EqualFold(s.Value, "limit") && i+2 < len(args) {
			off, ok1 := index(args[i+1])
			n, ok2 := index(args[i+2])
			return ok1 && ok2 && off >= 0 && off <= maxRange && n >= 0 && n <= maxRange
		}
	}
	return false
}
