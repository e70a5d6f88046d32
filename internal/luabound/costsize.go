package luabound

import (
	"math"
	"strings"

	"github.com/yuin/gopher-lua/ast"
)

// Sizes and lengths in the cost model: how long a string or table may be, and how many times
// a loop runs, as polynomials in the call's input, with apart what was read from Redis.

// size is a string's length, a table's count or a number's magnitude: p, plus parts read from
// Redis (each where it was read); unknown when the model cannot bound it.
type size struct {
	p       poly
	replies []read
	unknown bool
}

// read is a value read from Redis at one place (the frames around the call that read it), n
// times over: local b = a .. a holds a's read twice, and a chain of such names 2^k times,
// which the model counts as a number, not as a list.
type read struct {
	at []*frame
	n  float64
}

// reads is how many times z holds values read from Redis, in all.
func (z size) reads() float64 {
	n := 0.0
	for _, r := range z.replies {
		n += r.n
	}
	return n
}

// scaled is z with every read held f times as often.
func (z size) scaled(f float64) size {
	out := size{p: z.p.scale(f), unknown: z.unknown}
	for _, r := range z.replies {
		out.replies = append(out.replies, read{at: r.at, n: r.n * f})
	}
	return out
}

func sized(p poly) size { return size{p: p} }

func (z size) add(o size) size {
	return size{p: z.p.add(o.p), replies: readsOf(z.replies, o.replies), unknown: z.unknown || o.unknown}
}

// readsOf is the reads of a and b, one entry a place: a value read at one place and named
// twice (local b = a .. a) is one entry held twice, so that a chain of such names makes no
// longer a list, only a larger count. Two places are the same if they end in the same body: a
// body's frames around it are always the same ones (the text's nesting).
func readsOf(a, b []read) []read {
	if len(b) == 0 {
		return a
	}
	out := append([]read(nil), a...)
	for _, r := range b {
		if i := readAt(out, r.at); i >= 0 {
			out[i].n += r.n
		} else {
			out = append(out, r)
		}
	}
	return out
}

func readAt(in []read, at []*frame) int {
	for i, x := range in {
		if len(x.at) == len(at) && (len(at) == 0 || x.at[len(x.at)-1] == at[len(at)-1]) {
			return i
		}
	}
	return -1
}

// numberSize is what a number costs as a string.
const numberSize = 24

// sizeOf is e's length, e evaluated with the frames at around it.
func (w *walker) sizeOf(e ast.Expr, at []*frame) size {
	if !w.step(1 + len(at)) {
		return size{unknown: true}
	}
	switch e := e.(type) {
	case nil, *ast.NilExpr, *ast.TrueExpr, *ast.FalseExpr, *ast.FunctionExpr:
		return sized(poly{})
	case *ast.StringExpr:
		return sized(lit(float64(len(e.Value))))
	case *ast.NumberExpr:
		return sized(lit(numberSize))
	case *ast.Comma3Expr:
		return w.nameSize("...")
	case *ast.IdentExpr:
		if w.f.sources[e.Value] && (e.Value == "ARGV" || e.Value == "KEYS") {
			return sized(polyC)
		}
		return w.nameSize(e.Value)
	case *ast.AttrGetExpr:
		return w.elemOf(e.Object, at)
	case *ast.StringConcatOpExpr:
		z := sized(poly{})
		for _, p := range concatParts(e, nil) {
			z = z.add(w.sizeOf(p, at))
		}
		return z
	case *ast.LogicalOpExpr:
		return w.sizeOf(e.Lhs, at).add(w.sizeOf(e.Rhs, at))
	case *ast.TableExpr:
		return sized(lit(float64(len(e.Fields))))
	case *ast.FuncCallExpr:
		return w.callSize(e, at)
	}
	return sized(lit(numberSize)) // arithmetic, comparisons, not, #
}

// callSize is the length of what a call returns.
func (w *walker) callSize(e *ast.FuncCallExpr, at []*frame) size {
	subject, args := e.Receiver, e.Args
	name := "string." + e.Method
	if e.Receiver == nil {
		name = funcName(e)
		if len(args) > 0 {
			subject, args = args[0], args[1:]
		}
	}
	switch name {
	case "redis.call", "redis.pcall":
		return size{p: poly{}, replies: []read{{at: at, n: 1}}}
	case "cjson.decode", "cmsgpack.unpack", "string.sub", "string.upper", "string.lower", "string.reverse":
		return w.sizeOf(subject, at)
	case "string.rep":
		return sized(lit(repSize(subject, args)))
	case "string.format":
		z := w.sizeOf(subject, at)
		for _, a := range args {
			z = z.add(w.sizeOf(a, at))
		}
		return z
	case "string.gsub":
		if len(args) < 2 {
			return sized(poly{})
		}
		repl := w.sizeOf(args[1], at)
		if w.functionValue(args[1]) || isTable(args[1]) || repl.unknown || len(repl.replies) > 0 || !repl.p.literal() {
			return size{unknown: true}
		}
		return w.sizeOf(subject, at).scaled(repl.p.constant() + 1)
	case "tostring", "tonumber", "string.len", "string.byte", "string.char", "type", "string.find", "string.match",
		"rawequal", "select", "unpack":
		return sized(lit(numberSize))
	}
	if strings.HasPrefix(name, "math.") || strings.HasPrefix(name, "bit.") {
		return sized(lit(numberSize))
	}
	return size{unknown: true}
}

// repSize is string.rep's length: count copies of the literal (literals only: Check refuses
// anything else, and a value's count or string as huge).
func repSize(s ast.Expr, args []ast.Expr) float64 {
	str, ok := s.(*ast.StringExpr)
	if !ok || len(args) == 0 {
		return math.Inf(1)
	}
	n, ok := args[0].(*ast.NumberExpr)
	if !ok {
		return math.Inf(1)
	}
	v, ok := literal(n)
	if !ok {
		return math.Inf(1)
	}
	return math.Max(v, 0) * float64(len(str.Value))
}

// elemOf is the length of an element of t (t[k], or what a for walks of t).
func (w *walker) elemOf(t ast.Expr, at []*frame) size {
	switch t := t.(type) {
	case *ast.IdentExpr:
		if w.f.sources[t.Value] && (t.Value == "ARGV" || t.Value == "KEYS") {
			return sized(polyS)
		}
		z := w.nameSize(t.Value)
		if z.unknown && len(z.p) == 0 {
			return z
		}
		return size{p: z.p, replies: z.replies, unknown: z.unknown || !w.f.sources[t.Value]}
	case *ast.FuncCallExpr:
		return w.callSize(t, at)
	case *ast.AttrGetExpr:
		return w.elemOf(t.Object, at)
	}
	return size{unknown: true}
}

// nameSize is the longest of what a name is ever given (kept, once computed); a name whose
// size depends on itself, other than by the growth grow charges, has none.
func (w *walker) nameSize(name string) size {
	if z, ok := w.sizes[name]; ok {
		return z
	}
	if !w.step(1) {
		return size{unknown: true}
	}
	if w.sizing[name] {
		return size{unknown: true}
	}
	w.sizing[name] = true
	z := sized(poly{})
	for _, g := range w.givens[name] {
		z = z.add(w.givenSize(name, g))
	}
	delete(w.sizing, name)
	if !w.step(len(z.replies) + len(z.p)) { // what it holds is work to every reader of it
		z = size{unknown: true}
	}
	w.sizes[name] = z
	return z
}

func (w *walker) givenSize(name string, g given) size {
	switch {
	case g.counter != nil:
		return sized(lit(numberSize))
	case g.elem:
		if g.e == nil {
			return size{unknown: true}
		}
		z := w.elemOf(g.e, g.stack)
		if g.str { // a match is part of the string
			z = w.sizeOf(g.e, g.stack)
		}
		if len(z.replies) > 0 { // an element is read on its own step
			z.replies = []read{{at: g.stack, n: 1}}
		}
		return z
	case g.e == nil: // a parameter, or a call's later value: as if read where it is given
		return size{p: poly{}, replies: []read{{at: g.stack, n: 1}}}
	case g.self:
		rest := sized(poly{})
		for _, p := range concatParts(g.e, nil) {
			if id, ok := p.(*ast.IdentExpr); !ok || id.Value != name {
				rest = rest.add(w.sizeOf(p, g.stack))
			}
		}
		return size{p: w.multAt(g.stack).mul(rest.p), replies: rest.replies, unknown: rest.unknown}
	}
	if t, ok := g.e.(*ast.TableExpr); ok {
		n := lit(float64(len(t.Fields)))
		for _, st := range w.stores[name] {
			n = n.add(w.multAt(st))
		}
		return sized(n)
	}
	return w.sizeOf(g.e, g.stack)
}

// numBound is how large a number e may be (in magnitude), for a loop's bounds.
func (w *walker) numBound(e ast.Expr, at []*frame) size {
	if !w.step(1 + len(at)) {
		return size{unknown: true}
	}
	switch e := e.(type) {
	case *ast.NumberExpr:
		v, _ := literal(e)
		return sized(lit(math.Abs(v)))
	case *ast.UnaryMinusOpExpr:
		return w.numBound(e.Expr, at)
	case *ast.UnaryLenOpExpr:
		return w.sizeOf(e.Expr, at)
	case *ast.ArithmeticOpExpr:
		switch e.Operator {
		case "+", "-":
			return w.numBound(e.Lhs, at).add(w.numBound(e.Rhs, at))
		case "/", "%":
			if n, ok := e.Rhs.(*ast.NumberExpr); ok {
				if v, _ := literal(n); math.Abs(v) >= 1 {
					z := w.numBound(e.Lhs, at)
					if e.Operator == "%" {
						return sized(lit(math.Abs(v)))
					}
					return size{p: z.p.scale(1 / math.Abs(v)), replies: z.replies, unknown: z.unknown}
				}
			}
		}
	case *ast.IdentExpr:
		return w.nameBound(e.Value)
	}
	return size{unknown: true}
}

// nameBound is the largest number a name is ever given (kept, once computed: a name given
// names given names would otherwise be worked out once per path to it); a name whose bound
// depends on itself has none.
func (w *walker) nameBound(name string) size {
	if z, ok := w.bounds[name]; ok {
		return z
	}
	key := "#" + name
	if w.sizing[key] {
		return size{unknown: true}
	}
	w.sizing[key] = true
	z := w.givenBounds(w.givens[name])
	delete(w.sizing, key)
	w.bounds[name] = z
	return z
}

func (w *walker) givenBounds(gs []given) size {
	if len(gs) == 0 {
		return size{unknown: true}
	}
	z := sized(poly{})
	for _, g := range gs {
		switch {
		case g.counter != nil:
			z = z.add(w.numBound(g.counter.Init, g.stack)).add(w.numBound(g.counter.Limit, g.stack))
		case g.e == nil || g.elem:
			return size{unknown: true}
		default:
			z = z.add(w.numBound(g.e, g.stack))
		}
	}
	return z
}
