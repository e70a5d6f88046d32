package luabound

import (
	"fmt"

	"github.com/yuin/gopher-lua/ast"
)

// The cost model's walk of a script (cost.go says what it charges). It runs twice over the
// same tree: the first pass meets every body and learns what each name is given and where,
// and the second charges each operation, at its place, by what it does.

// frameKind is how often a body runs each time its parent reaches it.
type frameKind int

const (
	kindOnce    frameKind = iota // a do block, or a function's body (charged where it is called)
	kindCounted                  // a loop whose length is factor
	kindReply                    // a walk of a value read from Redis: charged to the reply
	kindFueled                   // a loop only the fuel bounds
)

// frame is one body: a loop's, a function's or a do block's.
type frame struct {
	node   ast.PositionHolder
	fn     *ast.FunctionExpr // a function's body
	parent []*frame          // the frames around it
	kind   frameKind
	factor poly
	ready  bool
	weight poly // with fuel: what one run of the body costs, the bodies within it aside
	extra  poly // with fuel: what one run costs beyond its weight, as the input says
}

// given is one value a name is given, and where.
type given struct {
	e       ast.Expr           // nil: what the pass cannot see (a parameter, a call's second value)
	elem    bool               // an element of e (a generic for's variables)
	counter *ast.NumberForStmt // a numeric for's variable
	self    bool               // e is a concatenation that holds the name itself
	str     bool               // e is a string whose matches a gmatch walks
	stack   []*frame
}

// walker is one script's cost model. With fuel > 0, every body is charged at run time by
// the fuel's counter, its weight a step; without, every loop must have a length.
type walker struct {
	f      *facts
	fuel   int
	pass   int
	stack  []*frame
	frames map[ast.PositionHolder]*frame
	order  []*frame // the bodies in the order their text starts
	givens map[string][]given
	stores map[string][][]*frame
	defs   map[*ast.FunctionExpr][]*frame
	fnCost map[*ast.FunctionExpr]poly
	busy   map[*ast.FunctionExpr]bool
	anyFn  poly
	sizes  map[string]size
	bounds map[string]size    // nameBound's answers, kept
	copies map[*frame]float64 // copies.go
	sizing map[string]bool
	cost   poly
	budget budget
	at     ast.PositionHolder // the statement being charged
	err    error
}

func newWalker(f *facts, fuel, tokens int) *walker {
	return &walker{f: f, fuel: fuel, frames: map[ast.PositionHolder]*frame{}, givens: map[string][]given{},
		stores: map[string][][]*frame{}, defs: map[*ast.FunctionExpr][]*frame{}, fnCost: map[*ast.FunctionExpr]poly{},
		busy: map[*ast.FunctionExpr]bool{}, sizes: map[string]size{}, bounds: map[string]size{}, copies: map[*frame]float64{}, sizing: map[string]bool{},
		cost: poly{}, budget: newBudget(tokens)}
}

// step counts n steps of the model's own work (budget.go); false: it is over, and the script
// refused.
func (w *walker) step(n int) bool {
	if w.budget.spend(n) {
		return true
	}
	if w.err == nil {
		w.err = w.budget.over
	}
	return false
}

// costOf runs the model over chunk, a script of tokens tokens: the script's bound, or why it
// has none.
func costOf(chunk []ast.Stmt, f *facts, fuel, tokens int) (*walker, Bound, error) {
	w := newWalker(f, fuel, tokens)
	w.pass = 1
	w.stmts(chunk)
	w.pass = 2
	for fn := range w.defs {
		w.functionCost(fn)
	}
	for _, c := range w.fnCost {
		w.anyFn = w.anyFn.upper(c)
	}
	w.stmts(chunk)
	if w.err != nil {
		return w, Bound{}, w.err
	}
	total := w.cost
	if fuel > 0 { // the bodies take their weights from the fuel, so each runs at most fuel/weight times
		total = total.add(lit(float64(fuel)))
		for _, fr := range w.order {
			total = total.add(fr.extra.scale(float64(fuel) / max(1, fr.weight.constant())))
		}
	}
	if c := total.constant(); c > Budget {
		return w, Bound{}, fmt.Errorf("its cost is bounded by %.3g units before any input, over the budget of %d", c, Budget)
	}
	return w, Bound{p: total}, nil
}

func (w *walker) fail(n ast.PositionHolder, format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%s: %s", at(n), fmt.Sprintf(format, args...))
	}
}

// charge adds what one operation here costs: times the loops around it, or, with fuel, to
// its body's weight (what depends on the input: for each step the fuel allows).
func (w *walker) charge(p poly) {
	if w.pass != 2 || len(p) == 0 || !w.step(len(p)+len(w.stack)) {
		return
	}
	if w.fuel == 0 {
		m := w.mult()
		here := m.mul(p)
		if c := here.constant(); c > Budget {
			w.fail(w.at, "this costs up to %.3g units (the loops around it run up to %.3g times), over the budget of %d", c, m.constant(), Budget)
		}
		if here.atOne() >= walkUnits && w.inReplyWalk() {
			w.fail(w.at, "this costs %.3g units on each element of a reply, whose length has no bound (a Redis call that walks a whole value costs %d)", here.atOne(), walkUnits)
		}
		w.cost = w.cost.add(here)
		return
	}
	if len(w.stack) == 0 { // no fuel is taken here: the budget holds by itself
		if c := p.constant(); c > Budget {
			w.fail(w.at, "this costs up to %.3g units, over the budget of %d", c, Budget)
		}
		w.cost = w.cost.add(p)
		return
	}
	top := w.stack[len(w.stack)-1]
	top.weight = top.weight.add(lit(p.constant()))
	top.extra = top.extra.add(p.nonConstant())
}

// inReplyWalk says whether the statement being charged runs once per element of a reply, in
// the function it is in.
func (w *walker) inReplyWalk() bool {
	for i := len(w.stack) - 1; i >= 0 && w.stack[i].fn == nil; i-- {
		if w.stack[i].kind == kindReply {
			return true
		}
	}
	return false
}

// enter is the frame of body node (made on the first pass), pushed.
func (w *walker) enter(node ast.PositionHolder, fn *ast.FunctionExpr) *frame {
	fr := w.frames[node]
	if fr == nil {
		fr = &frame{node: node, fn: fn, parent: append([]*frame(nil), w.stack...), weight: poly{}, extra: poly{}}
		w.frames[node] = fr
		w.order = append(w.order, fr)
	}
	w.stack = append(w.stack, fr)
	return fr
}

func (w *walker) leave() { w.stack = w.stack[:len(w.stack)-1] }

func (w *walker) body(node ast.PositionHolder, ss []ast.Stmt, after ast.Expr) {
	w.enter(node, nil)
	w.charge(lit(1))
	w.stmts(ss)
	w.expr(after)
	w.leave()
}

func (w *walker) stmts(ss []ast.Stmt) {
	for _, s := range ss {
		w.stmt(s)
	}
}

func (w *walker) stmt(s ast.Stmt) {
	if !w.step(1) {
		return
	}
	w.at = s
	w.charge(lit(1))
	switch s := s.(type) {
	case *ast.LocalAssignStmt:
		w.exprs(s.Exprs...)
		for i, n := range s.Names {
			w.give(n, valueAt(s.Exprs, i, len(s.Names)))
		}
	case *ast.AssignStmt:
		w.assign(s)
	case *ast.FuncCallStmt:
		w.expr(s.Expr)
	case *ast.DoBlockStmt:
		w.body(s, s.Stmts, nil)
	case *ast.IfStmt:
		w.expr(s.Condition)
		w.stmts(s.Then)
		w.stmts(s.Else)
	case *ast.WhileStmt:
		if w.pass == 1 { // where its text is, for the order of the bodies
			w.expr(s.Condition)
			w.body(s, s.Stmts, nil)
		} else { // charged on each step
			w.body(s, s.Stmts, s.Condition)
		}
	case *ast.RepeatStmt:
		w.body(s, s.Stmts, s.Condition)
	case *ast.NumberForStmt:
		w.exprs(s.Init, s.Limit, s.Step)
		w.enter(s, nil)
		w.charge(lit(1))
		if w.pass == 1 {
			w.givens[s.Name] = append(w.givens[s.Name], given{counter: s, stack: w.snapshot()})
		}
		w.stmts(s.Stmts)
		w.leave()
	case *ast.GenericForStmt:
		w.exprs(s.Exprs...)
		w.enter(s, nil)
		w.charge(lit(1))
		if w.pass == 1 {
			t, str := iterated(s)
			for _, n := range s.Names {
				w.givens[n] = append(w.givens[n], given{e: t, elem: true, str: str, stack: w.snapshot()})
			}
		}
		w.stmts(s.Stmts)
		w.leave()
	case *ast.FuncDefStmt:
		if s.Name != nil {
			w.exprs(s.Name.Func, s.Name.Receiver)
			if id, ok := s.Name.Func.(*ast.IdentExpr); ok && s.Name.Method == "" {
				w.give(id.Value, s.Func)
			}
		}
		w.function(s.Func)
	case *ast.ReturnStmt:
		w.exprs(s.Exprs...)
		for _, e := range s.Exprs { // the reply is a copy
			if w.pass == 2 && len(w.stack) == 0 {
				w.copied(s, w.sizeOf(e, w.stack), "the script's reply")
			}
		}
	}
}

// assign walks t[k] = v and x = v: the text's order, then what each name is given; a name
// that a loop grows by concatenation is charged for its copies (grow).
func (w *walker) assign(s *ast.AssignStmt) {
	for _, l := range s.Lhs {
		if a, ok := l.(*ast.AttrGetExpr); ok {
			w.exprs(a.Object, a.Key)
		}
	}
	w.exprs(s.Rhs...)
	for i, l := range s.Lhs {
		switch l := l.(type) {
		case *ast.IdentExpr:
			v := valueAt(s.Rhs, i, len(s.Lhs))
			w.give(l.Value, v)
			if n := occurrences(v, l.Value); n > 0 {
				w.grow(s, l.Value, v, n)
			}
		case *ast.AttrGetExpr:
			if n, ok := baseName(l); ok && w.pass == 1 {
				w.stores[n] = append(w.stores[n], w.snapshot())
			}
		}
	}
}

func (w *walker) give(name string, e ast.Expr) {
	if w.pass != 1 {
		return
	}
	w.givens[name] = append(w.givens[name], given{e: e, self: occurrences(e, name) > 0, stack: w.snapshot()})
}

func (w *walker) snapshot() []*frame { return append([]*frame(nil), w.stack...) }

// function walks a function's definition: its body is charged where it is called.
func (w *walker) function(fn *ast.FunctionExpr) {
	if w.pass == 1 {
		w.defs[fn] = w.snapshot()
		w.enter(fn, fn)
		if fn.ParList != nil {
			for _, n := range fn.ParList.Names {
				w.givens[n] = append(w.givens[n], given{stack: w.snapshot()})
			}
			if fn.ParList.HasVargs {
				w.givens["..."] = append(w.givens["..."], given{stack: w.snapshot()})
			}
		}
		w.stmts(fn.Stmts)
		w.leave()
		return
	}
	w.functionCost(fn)
}

// functionCost is what one call of fn costs (once computed, kept); a function that its own
// body reaches again, through a callback, has none.
func (w *walker) functionCost(fn *ast.FunctionExpr) poly {
	if c, ok := w.fnCost[fn]; ok {
		return c
	}
	if !w.step(1) {
		return lit(1)
	}
	if w.busy[fn] {
		w.fail(fn, "a function reaches itself through a callback: recursion cannot be ruled out")
		return lit(1)
	}
	w.busy[fn] = true
	saved, savedCost := w.stack, w.cost
	w.stack = append([]*frame(nil), w.defs[fn]...)
	if w.fuel == 0 { // charged where it is called; with fuel, its body charges itself
		w.cost = poly{}
	}
	w.enter(fn, fn)
	w.charge(lit(1))
	w.stmts(fn.Stmts)
	w.leave()
	c := w.cost
	w.stack = saved
	if w.fuel == 0 {
		w.cost = savedCost
	}
	delete(w.busy, fn)
	w.fnCost[fn] = c
	return c
}

func (w *walker) exprs(es ...ast.Expr) {
	for _, e := range es {
		w.expr(e)
	}
}

func (w *walker) expr(e ast.Expr) {
	switch e := e.(type) {
	case nil:
	case *ast.FunctionExpr:
		w.function(e)
	case *ast.FuncCallExpr:
		w.call(e)
	case *ast.StringConcatOpExpr:
		w.concat(e)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			w.exprs(f.Key, f.Value)
		}
	default:
		w.exprs(children(e)...)
	}
}

// concat charges a chain of concatenations once, by the string it builds.
func (w *walker) concat(e *ast.StringConcatOpExpr) {
	parts := concatParts(e, nil)
	w.exprs(parts...)
	if w.pass != 2 {
		return
	}
	z := w.sizeOf(e, w.stack)
	if c := z.p.constant(); c > MaxString {
		w.fail(e, "a concatenation builds a string of %.0f bytes, over %d", c, MaxString)
	}
	w.charge(lit(1).add(z.p.scale(1.0 / bytesPerUnit)))
	w.copied(e, z, "a concatenation")
}

// concatParts are the operands of a chain a .. b .. c, in order.
func concatParts(e ast.Expr, out []ast.Expr) []ast.Expr {
	if c, ok := e.(*ast.StringConcatOpExpr); ok {
		return concatParts(c.Rhs, concatParts(c.Lhs, out))
	}
	return append(out, e)
}

// occurrences counts the name among e's concatenated operands.
func occurrences(e ast.Expr, name string) int {
	if _, ok := e.(*ast.StringConcatOpExpr); !ok {
		return 0
	}
	n := 0
	for _, p := range concatParts(e, nil) {
		if id, ok := p.(*ast.IdentExpr); ok && id.Value == name {
			n++
		}
	}
	return n
}

// iterated is what a generic for walks: t of ipairs(t), pairs(t) and next, t; the string of
// a gmatch (str); nil for anything else.
func iterated(s *ast.GenericForStmt) (t ast.Expr, str bool) {
	if len(s.Exprs) == 2 {
		return s.Exprs[1], false
	}
	if len(s.Exprs) != 1 {
		return nil, false
	}
	call, ok := s.Exprs[0].(*ast.FuncCallExpr)
	if !ok {
		return nil, false
	}
	if call.Receiver != nil {
		return call.Receiver, call.Method == "gmatch"
	}
	switch name := funcName(call); name {
	case "ipairs", "pairs", "string.gmatch":
		if len(call.Args) > 0 {
			return call.Args[0], name == "string.gmatch"
		}
	}
	return nil, false
}
