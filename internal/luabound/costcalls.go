package luabound

import (
	"github.com/yuin/gopher-lua/ast"
)

// The cost model's loops and calls: how long each loop runs, what a value read from Redis
// costs when it is read again, and what each library call does.

// settle works out how often fr's body runs each time its parent reaches it.
func (w *walker) settle(fr *frame) {
	if fr.ready {
		return
	}
	w.step(1)
	fr.ready, fr.kind, fr.factor = true, kindCounted, poly{} // a loop that reaches itself: no length
	var z size
	switch s := fr.node.(type) {
	case *ast.NumberForStmt:
		z = w.forLength(s, fr.parent)
	case *ast.GenericForStmt:
		t, str := iterated(s)
		if t == nil {
			z = size{unknown: true}
		} else {
			z = w.sizeOf(t, fr.parent)
			if str {
				z.p = z.p.add(lit(1)) // a match may be empty
			}
		}
	case *ast.WhileStmt, *ast.RepeatStmt:
		z = size{unknown: true}
	default:
		fr.kind, fr.factor = kindOnce, lit(1)
		return
	}
	switch {
	case z.unknown && w.fuel > 0:
		fr.kind, fr.factor = kindFueled, lit(float64(w.fuel))
	case z.unknown:
		fr.kind, fr.factor = kindFueled, lit(float64(Budget)+1)
		w.fail(fr.node, "a loop whose length the cost model cannot bound")
	case len(z.replies) > 0:
		w.rewalk(fr.node, z.replies, fr.parent, "a loop")
		fr.kind, fr.factor = kindReply, z.p.add(lit(1))
	default:
		fr.factor = z.p
	}
}

// forLength is how many times a numeric for runs, at most.
func (w *walker) forLength(s *ast.NumberForStmt, at []*frame) size {
	step := 1.0
	if s.Step != nil {
		n, neg := s.Step, false
		if m, ok := n.(*ast.UnaryMinusOpExpr); ok {
			n, neg = m.Expr, true
		}
		lit, ok := n.(*ast.NumberExpr)
		if !ok {
			return size{unknown: true}
		}
		v, _ := literal(lit)
		if v < 1 {
			return size{unknown: true}
		}
		step = v
		if neg {
			step = -v
		}
	}
	a, aok := s.Init.(*ast.NumberExpr)
	b, bok := s.Limit.(*ast.NumberExpr)
	if aok && bok {
		x, _ := literal(a)
		y, _ := literal(b)
		return sized(lit(max(0, float64(int64((y-x)/step))+1)))
	}
	z := w.numBound(s.Init, at).add(w.numBound(s.Limit, at))
	z.p = z.p.scale(1 / max(step, -step)).add(lit(1))
	return z
}

// mult is how many times the innermost body here runs per call of its function (or per run
// of the script).
func (w *walker) mult() poly { return w.multAt(w.stack) }

func (w *walker) multAt(stack []*frame) poly {
	m := lit(1)
	for i := len(stack) - 1; i >= 0 && stack[i].fn == nil && w.step(1+len(m)); i-- {
		w.settle(stack[i])
		if stack[i].kind != kindReply {
			m = m.mul(stack[i].factor)
		}
	}
	return m
}

// rewalk refuses a value read from Redis (where each of replies says) and read again at:
// within a function it was not read in, within a walk of a reply or a loop only the fuel
// bounds, more than maxRewalks times, or as often as the input says.
func (w *walker) rewalk(n ast.PositionHolder, replies []read, at []*frame, what string) {
	for _, r := range replies {
		if m := w.rereads(n, r, at, what); m > maxRewalks {
			w.fail(n, "%s reads a value read from Redis outside its loop %.0f times (more than %d): its size has no bound", what, m, maxRewalks)
		}
	}
}

// rereads is how many times what is at reads r's value again for each time it was read: the
// counted loops between the two; a function, a walk of a reply or a loop only the fuel bounds
// between them, or a loop as long as the input, fails.
func (w *walker) rereads(n ast.PositionHolder, r read, at []*frame, what string) float64 {
	from := r.at
	if !w.step(len(from) + len(at)) {
		return 1
	}
	k := 0
	for k < len(from) && k < len(at) && from[k] == at[k] {
		k++
	}
	m := 1.0
	for _, fr := range at[k:] {
		w.settle(fr)
		switch {
		case fr.fn != nil:
			w.fail(n, "%s reads again, on each call of a function, a value read from Redis outside it, whose size has no bound", what)
		case fr.kind == kindReply || fr.kind == kindFueled:
			w.fail(n, "%s reads again, on each step of a loop whose length has no bound, a value read from Redis outside it", what)
		case !fr.factor.literal():
			w.fail(n, "%s reads again, as many times as the input is long, a value read from Redis outside its loop", what)
		default:
			m *= fr.factor.constant()
		}
	}
	return m
}

// grow charges x = x .. y in a loop: each step copies what was built, so n steps cost n^2/2
// copies of y; a string that doubles, or that grows for as long as a reply or the fuel says,
// is refused.
func (w *walker) grow(s ast.Stmt, name string, v ast.Expr, n int) {
	if w.pass != 2 {
		return
	}
	loops := false
	for _, fr := range w.stack {
		w.settle(fr)
		switch {
		case fr.fn != nil && w.fuel > 0, fr.fn != nil && !isParam(fr.fn, name):
			w.fail(s, "%s grows on each call of a function: use table.concat", name)
			return
		case fr.kind == kindReply || fr.kind == kindFueled:
			w.fail(s, "%s grows on each step of a loop whose length has no bound, and each step copies it: use table.concat", name)
			return
		case fr.kind == kindCounted:
			loops = true
		}
	}
	if !loops {
		return
	}
	if n > 1 {
		w.fail(s, "%s doubles on each step of a loop", name)
		return
	}
	rest := sized(poly{})
	for _, p := range concatParts(v, nil) {
		if id, ok := p.(*ast.IdentExpr); !ok || id.Value != name {
			rest = rest.add(w.sizeOf(p, w.stack))
		}
	}
	if rest.unknown || len(rest.replies) > 0 {
		w.fail(s, "%s grows on each step of a loop by a value whose size has no bound: use table.concat", name)
		return
	}
	m := w.mult()
	if built := m.mul(rest.p).constant(); built > MaxString {
		w.fail(s, "%s grows to %.0f bytes, over %d", name, built, MaxString)
	}
	w.cost = w.cost.add(m.mul(m).mul(rest.p).scale(0.5 / bytesPerUnit))
}

func isParam(fn *ast.FunctionExpr, name string) bool {
	if fn.ParList == nil {
		return false
	}
	for _, p := range fn.ParList.Names {
		if p == name {
			return true
		}
	}
	return false
}

// call walks a call's parts in the text's order, then charges what the function does.
func (w *walker) call(e *ast.FuncCallExpr) {
	w.exprs(e.Func, e.Receiver)
	w.exprs(e.Args...)
	if w.pass == 1 {
		switch funcName(e) {
		case "table.insert", "rawset":
			if len(e.Args) > 0 {
				if n, ok := baseName(e.Args[0]); ok {
					w.stores[n] = append(w.stores[n], w.snapshot())
				}
			}
		}
		return
	}
	w.charge(lit(1))
	subject, args, name := e.Receiver, e.Args, "string."+e.Method
	if e.Receiver == nil {
		name = funcName(e)
		if len(args) > 0 {
			subject, args = args[0], args[1:]
		}
	}
	w.callee(e, e.Func, name, subject, args)
}

// callee charges what the function called does (fn the function's expression; name its
// library name; subject its first argument, or the receiver of a method).
func (w *walker) callee(e *ast.FuncCallExpr, fn ast.Expr, name string, subject ast.Expr, args []ast.Expr) {
	switch name {
	case "redis.call", "redis.pcall":
		units, why := redisCall(subject, args)
		if why != "" {
			w.fail(e, "%s of %s", name, why)
		}
		w.charge(lit(units))
	case "pcall", "xpcall":
		if subject == nil {
			return
		}
		if inner, ok := libFunc(subject); ok {
			var s2 ast.Expr
			var rest []ast.Expr
			if len(args) > 0 && name == "pcall" {
				s2, rest = args[0], args[1:]
			}
			w.callee(e, subject, inner, s2, rest)
		} else {
			w.charge(w.fnCostOf(subject))
		}
		if name == "xpcall" && len(args) > 0 {
			w.charge(w.fnCostOf(args[0]))
		}
	case "string.find", "string.match", "string.gmatch", "string.gsub":
		w.match(e, name, subject, args)
	case "string.rep":
		size := repSize(subject, args)
		if size > MaxString {
			w.fail(e, "string.rep builds a string of %.0f bytes, over %d", size, MaxString)
		}
		w.charge(lit(size / bytesPerUnit))
	case "table.sort", "table.foreach", "table.foreachi":
		z := w.sizeOf(subject, w.stack)
		if z.unknown {
			w.fail(e, "%s of a table whose size the cost model cannot bound", name)
		}
		per := lit(1)
		if len(args) > 0 {
			per = per.add(w.fnCostOf(args[0]))
		}
		if name == "table.sort" {
			per = per.scale(sortUnits)
		}
		w.charge(z.p.add(lit(z.reads())).mul(per))
	default:
		if _, lib := libFunc(fn); lib || fn == nil || knownFunc(fn) {
			return
		}
		w.charge(w.fnCostOf(fn))
	}
}

// fnCostOf is what one call of the function value e costs: with fuel, nothing here (its
// body charges itself); a function of the script's, its body; any other value, the dearest
// of the script's functions.
func (w *walker) fnCostOf(e ast.Expr) poly {
	if w.fuel > 0 || e == nil {
		return poly{}
	}
	if _, lib := libFunc(e); lib || knownFunc(e) {
		return lit(1)
	}
	switch e := e.(type) {
	case *ast.FunctionExpr:
		return w.functionCost(e)
	case *ast.StringExpr, *ast.TableExpr, *ast.NumberExpr, *ast.NilExpr:
		return poly{}
	case *ast.IdentExpr:
		c, known := poly{}, len(w.givens[e.Value]) > 0
		for _, g := range w.givens[e.Value] {
			switch v := g.e.(type) {
			case *ast.FunctionExpr:
				c = c.upper(w.functionCost(v))
			case *ast.StringExpr, *ast.TableExpr:
			default:
				known = false
			}
		}
		if known {
			return c
		}
	}
	if len(w.busy) > 0 {
		w.fail(w.at, "a function calls a function value, which may be any of the script's: recursion cannot be ruled out")
	}
	return w.anyFn
}

// match charges a pattern function by its pattern's worst case on its subject, and gsub's
// replacement: its callback on each match, or the string it builds.
func (w *walker) match(e *ast.FuncCallExpr, name string, subject ast.Expr, args []ast.Expr) {
	if len(args) == 0 {
		return
	}
	pat, ok := args[0].(*ast.StringExpr)
	if !ok {
		w.fail(e, "%s with a pattern that is not a literal: what it can cost cannot be read", name)
		return
	}
	pc := pattern{degree: 1, coef: float64(len(pat.Value) + 1)}
	if name != "string.find" || len(args) < 3 || !truthy(args[2]) {
		var err error
		if pc, err = patternCost(pat.Value, name == "string.gmatch"); err != nil {
			w.fail(e, "%s with the pattern %q: %v", name, pat.Value, err)
			return
		}
	}
	z := w.sizeOf(subject, w.stack)
	if z.unknown {
		w.fail(e, "%s over a string whose size the cost model cannot bound", name)
		return
	}
	if len(z.replies) > 0 && pc.degree >= 2 {
		w.fail(e, "%s with the pattern %q, which can backtrack, over a value read from Redis: it costs up to the value's size to the power %d", name, pat.Value, pc.degree)
		return
	}
	w.rewalk(e, z.replies, w.stack, name)
	cost := z.p.add(lit(1)).pow(pc.degree).scale(pc.coef).add(lit(pc.coef * z.reads()))
	if c := w.mult().mul(cost).constant(); (w.fuel == 0 || len(w.stack) == 0) && c > Budget {
		w.fail(e, "%s with the pattern %q costs up to %.3g units here, over the budget of %d", name, pat.Value, c, Budget)
	}
	w.charge(cost)
	if name != "string.gsub" || len(args) < 2 {
		return
	}
	switch {
	case w.functionValue(args[1]):
		w.charge(z.p.add(lit(1 + z.reads())).mul(w.fnCostOf(args[1])))
	case isTable(args[1]):
	default:
		out := w.callSize(e, w.stack)
		if out.unknown {
			w.fail(e, "string.gsub replaces each match with a value whose size has no bound")
			return
		}
		if c := out.p.constant(); c > MaxString {
			w.fail(e, "string.gsub builds a string of up to %.0f bytes, over %d", c, MaxString)
		}
		w.charge(out.p.scale(1.0 / bytesPerUnit))
	}
}

func isTable(e ast.Expr) bool {
	_, ok := e.(*ast.TableExpr)
	return ok
}

// functionValue: e may be a function (a function, a name given one or given what cannot be
// seen, a table's field).
func (w *walker) functionValue(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.FunctionExpr, *ast.AttrGetExpr:
		return true
	case *ast.IdentExpr:
		for _, g := range w.givens[e.Value] {
			if _, fn := g.e.(*ast.FunctionExpr); fn || g.e == nil || g.elem {
				return true
			}
		}
	}
	return false
}

func truthy(e ast.Expr) bool {
	switch e.(type) {
	case *ast.NilExpr, *ast.FalseExpr:
		return false
	}
	return true
}
