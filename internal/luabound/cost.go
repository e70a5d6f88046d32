package luabound

import (
	"fmt"
	"math"
)

// The cost model. A script is charged in units, one a Lua statement or loop step (some 20 ns
// of a master's time on the machines measured), and each operation by what it does:
//   - a Redis call, callUnits;
//   - a string it builds (concatenation, string.rep, gsub), a unit per bytesPerUnit bytes, and
//     none from literals may pass MaxString;
//   - a pattern match, by its pattern's worst case (pattern.go) on its subject's size;
//   - a call of the script's own function, what that function's body costs, and a callback
//     (gsub's, table.sort's, pcall's) that cost for each time the library calls it;
//   - an operation inside loops, times the product of the loops' lengths.
//
// Lengths and sizes are polynomials in two numbers of the call: c, the larger of #KEYS and
// #ARGV, and s, the longest argument. What Redis answers has no such bound: a loop over a reply,
// and a match over a value read from Redis, are charged to the reply (Redis did that much work
// to make it), once per time it is read; a value read outside a loop and walked or matched
// again on each step, more than maxRewalks times, is refused, as is a match that backtracks
// over such a value, or a string that grows on each step of a walk of a reply. KEYS in a script
// is refused outright: it walks the whole keyspace.
//
// What is left out, knowingly: a copy of a value read from Redis (into a concatenation, or as a
// Redis call's argument) is charged one unit, not by its length; copies run at memory speed,
// and a value that grows on each step is refused.

const (
	// Budget is the most units any call of an app user's script may cost, whatever its input.
	Budget = 1 << 24
	// PerInputByte is what a call may cost beyond Budget for each byte of its keys and
	// arguments: a script that walks its input costs what a command as long would.
	PerInputByte = 16
	// MaxString is the longest string a script may build from literals.
	MaxString = 8 << 20
	// callUnits is a Redis call's cost.
	callUnits = 32
	// bytesPerUnit is the bytes of a built string that cost one unit.
	bytesPerUnit = 8
	// sortUnits is what table.sort costs per element (n log n comparisons, log n taken as 20).
	sortUnits = 20
	// maxRewalks is how often a value read from Redis outside a loop may be read again within it.
	maxRewalks = 16
)

// poly is a cost or a size: the sum of coef * c^i * s^j, keyed by {i, j}.
type poly map[[2]int]float64

func lit(v float64) poly {
	if v == 0 {
		return poly{}
	}
	return poly{{0, 0}: v}
}

var (
	polyC = poly{{1, 0}: 1}
	polyS = poly{{0, 1}: 1}
)

func (p poly) add(q poly) poly {
	out := make(poly, len(p)+len(q))
	for k, v := range p {
		out[k] += v
	}
	for k, v := range q {
		out[k] += v
	}
	return out
}

func (p poly) mul(q poly) poly {
	out := poly{}
	for a, x := range p {
		for b, y := range q {
			out[[2]int{a[0] + b[0], a[1] + b[1]}] += x * y
		}
	}
	return out
}

func (p poly) scale(f float64) poly { return p.mul(lit(f)) }

func (p poly) pow(k int) poly {
	out := lit(1)
	for range k {
		out = out.mul(p)
	}
	return out
}

// upper is a polynomial at least as large as both p and q for c, s >= 1.
func (p poly) upper(q poly) poly {
	out := poly{}
	for k, v := range p {
		out[k] = v
	}
	for k, v := range q {
		out[k] = math.Max(out[k], v)
	}
	return out
}

func (p poly) constant() float64 { return p[[2]int{}] }

// atOne is p at c = s = 1: the sum of its coefficients.
func (p poly) atOne() float64 {
	t := 0.0
	for _, v := range p {
		t += v
	}
	return t
}

func (p poly) literal() bool {
	for k, v := range p {
		if k != [2]int{} && v != 0 {
			return false
		}
	}
	return true
}

// nonConstant is p without its constant term.
func (p poly) nonConstant() poly {
	out := poly{}
	for k, v := range p {
		if k != [2]int{} {
			out[k] = v
		}
	}
	return out
}

func (p poly) eval(c, s float64) float64 {
	total := 0.0
	for k, v := range p {
		total += v * math.Pow(c, float64(k[0])) * math.Pow(s, float64(k[1]))
	}
	return total
}

// Bound is what a script may cost, in units, for a call's input: a polynomial in c (the larger
// of #KEYS and #ARGV) and s (the longest argument). The zero Bound costs nothing.
type Bound struct{ p poly }

// Cost is the bound for a call with c keys or arguments, the longest of them s bytes.
func (b Bound) Cost(c, s int) float64 { return b.p.eval(float64(c), float64(s)) }

// Static is the bound's part that no input changes (the cost of a call with no input).
func (b Bound) Static() float64 { return b.p.constant() }

// Allows returns nil if a call of the script with these keys and arguments stays within the
// budget (Budget, plus PerInputByte a byte of its input), or why not.
func (b Bound) Allows(keys, argv [][]byte) error {
	c, s, n := max(len(keys), len(argv)), 0, 0
	for _, a := range keys {
		s, n = max(s, len(a)), n+len(a)
	}
	for _, a := range argv {
		s, n = max(s, len(a)), n+len(a)
	}
	cost, allowed := b.Cost(c, s), float64(Budget)+PerInputByte*float64(n)
	if cost > allowed {
		return fmt.Errorf("with %d keys or arguments, the longest %d bytes, its cost is bounded by %.3g units, over the %.3g allowed", c, s, cost, allowed)
	}
	return nil
}

func (b Bound) String() string { return fmt.Sprintf("%v", map[[2]int]float64(b.p)) }
