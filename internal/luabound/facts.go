package luabound

import (
	"fmt"
	"maps"

	"github.com/yuin/gopher-lua/ast"
)

// facts are what one pass over the whole script learns of its names, before the check: the
// names are Lua's, and a name given two different things in two scopes counts as one (so a
// fact holds of every variable of that name).
type facts struct {
	// assigned holds everything given to each name: nil for what the pass cannot see (a
	// parameter, a generic for's variable, the second value of a call).
	assigned map[string][]ast.Expr
	// counters are the numeric for loops' variables.
	counters map[string]bool
	// stored are the names whose table is written to, or may be (t[k] = v, table.insert(t, v),
	// rawset, passed to a function of the script's, a method called on it), and aliased those
	// given a plain name or given to one (u = t).
	stored, aliased map[string]bool
	// sources are the names that only ever hold the script's arguments, a reply, or what
	// cjson or cmsgpack decoded, and whose table nothing writes to: their size is the
	// input's. bounded are the names that only ever hold bounded numbers (see number).
	sources, bounded map[string]bool
}

func learn(chunk []ast.Stmt) *facts {
	f := &facts{assigned: map[string][]ast.Expr{}, counters: map[string]bool{}, stored: map[string]bool{}, aliased: map[string]bool{}}
	f.stmts(chunk)
	// ARGV and KEYS are the input, unless the script writes to them or gives them something.
	input := map[string]bool{}
	for _, name := range []string{"ARGV", "KEYS"} {
		if !f.stored[name] && !f.aliased[name] && len(f.assigned[name]) == 0 {
			input[name] = true
		}
	}
	f.sources = maps.Clone(input)
	for name, es := range f.assigned {
		ok := !f.stored[name] && !f.aliased[name]
		for _, e := range es {
			ok = ok && e != nil && source(e, input)
		}
		if ok {
			f.sources[name] = true
		}
	}
	f.bounded = map[string]bool{}
	for name := range f.counters {
		f.bounded[name] = true
	}
	for name, es := range f.assigned {
		ok := len(es) > 0 || f.counters[name]
		for _, e := range es {
			ok = ok && e != nil && number(e, nil, f.sources)
		}
		if ok {
			f.bounded[name] = true
		} else {
			delete(f.bounded, name)
		}
	}
	return f
}

func (f *facts) give(name string, e ast.Expr) {
	f.assigned[name] = append(f.assigned[name], e)
	if id, ok := e.(*ast.IdentExpr); ok {
		f.aliased[name], f.aliased[id.Value] = true, true
	}
}

func (f *facts) stmts(ss []ast.Stmt) {
	for _, s := range ss {
		f.stmt(s)
	}
}

func (f *facts) stmt(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.LocalAssignStmt:
		for i, n := range s.Names {
			f.give(n, valueAt(s.Exprs, i, len(s.Names)))
		}
		f.exprs(s.Exprs)
	case *ast.AssignStmt:
		for i, l := range s.Lhs {
			switch l := l.(type) {
			case *ast.IdentExpr:
				f.give(l.Value, valueAt(s.Rhs, i, len(s.Lhs)))
			case *ast.AttrGetExpr:
				if n, ok := baseName(l); ok {
					f.stored[n] = true
				}
			}
			f.expr(l)
		}
		f.exprs(s.Rhs)
	case *ast.NumberForStmt:
		f.counters[s.Name] = true
		f.exprs([]ast.Expr{s.Init, s.Limit, s.Step})
		f.stmts(s.Stmts)
	case *ast.GenericForStmt:
		for _, n := range s.Names {
			f.give(n, nil)
		}
		f.exprs(s.Exprs)
		f.stmts(s.Stmts)
	case *ast.FuncDefStmt:
		if s.Name != nil && s.Name.Func != nil {
			if id, ok := s.Name.Func.(*ast.IdentExpr); ok {
				f.give(id.Value, nil)
			}
		}
		f.expr(s.Func)
	case *ast.FuncCallStmt:
		f.expr(s.Expr)
	case *ast.ReturnStmt:
		f.exprs(s.Exprs)
	case *ast.DoBlockStmt:
		f.stmts(s.Stmts)
	case *ast.IfStmt:
		f.expr(s.Condition)
		f.stmts(s.Then)
		f.stmts(s.Else)
	case *ast.WhileStmt:
		f.expr(s.Condition)
		f.stmts(s.Stmts)
	case *ast.RepeatStmt:
		f.expr(s.Condition)
		f.stmts(s.Stmts)
	}
}

func (f *facts) exprs(es []ast.Expr) {
	for _, e := range es {
		f.expr(e)
	}
}

func (f *facts) expr(e ast.Expr) {
	switch e := e.(type) {
	case *ast.FunctionExpr:
		if e.ParList != nil {
			for _, n := range e.ParList.Names {
				f.give(n, nil)
			}
		}
		f.stmts(e.Stmts)
		return
	case *ast.FuncCallExpr:
		switch name := funcName(e); {
		case name == "table.insert" || name == "rawset" || name == "table.remove" || name == "table.sort":
			if len(e.Args) > 0 {
				if n, ok := baseName(e.Args[0]); ok {
					f.stored[n] = true
				}
			}
		case e.Receiver != nil && !stringMethods[e.Method], e.Receiver == nil && !knownFunc(e.Func):
			// a function of the script's may write to any table it is given, or its receiver
			// (ARGV[i] and KEYS[i] are strings: giving one gives nothing to write to)
			for _, a := range append([]ast.Expr{e.Receiver}, e.Args...) {
				if n, ok := baseName(a); ok && !elementOfInput(a) {
					f.stored[n] = true
				}
			}
		}
	}
	for _, x := range children(e) {
		f.expr(x)
	}
}

// valueAt is what the i-th of n names gets from es: nil when a call or ... gives it (only
// the last expression spreads, and its values cannot be seen).
func valueAt(es []ast.Expr, i, n int) ast.Expr {
	if i >= len(es) {
		if len(es) > 0 && spreads(es[len(es)-1]) {
			return nil
		}
		return &ast.NilExpr{}
	}
	if i == len(es)-1 && n > len(es) && spreads(es[i]) {
		return nil // the first of several values of a call
	}
	return es[i]
}

func spreads(e ast.Expr) bool {
	switch e.(type) {
	case *ast.FuncCallExpr, *ast.Comma3Expr:
		return true
	}
	return false
}

// elementOfInput: e is ARGV[i] or KEYS[i].
func elementOfInput(e ast.Expr) bool {
	a, ok := e.(*ast.AttrGetExpr)
	if !ok {
		return false
	}
	id, ok := a.Object.(*ast.IdentExpr)
	return ok && (id.Value == "ARGV" || id.Value == "KEYS")
}

// baseName is the name at the root of t, t.a, t[k].b.
func baseName(e ast.Expr) (string, bool) {
	for {
		switch x := e.(type) {
		case *ast.IdentExpr:
			return x.Value, true
		case *ast.AttrGetExpr:
			e = x.Object
		default:
			return "", false
		}
	}
}

// funcName is lib.name or a global's name for a call of either, else "".
func funcName(e *ast.FuncCallExpr) string {
	if e.Receiver != nil {
		return ""
	}
	if id, ok := e.Func.(*ast.IdentExpr); ok {
		return id.Value
	}
	n, _ := libFunc(e.Func)
	return n
}

// source: e holds the script's arguments or part of them, a reply, or what was decoded from
// one: ARGV and KEYS (if nothing writes to them), ARGV[i], redis.call(...),
// redis.pcall(...), cjson.decode(...), cmsgpack.unpack(...), or a name of sources.
func source(e ast.Expr, sources map[string]bool) bool {
	switch e := e.(type) {
	case *ast.IdentExpr:
		return sources[e.Value]
	case *ast.AttrGetExpr:
		return source(e.Object, sources)
	case *ast.FuncCallExpr:
		switch funcName(e) {
		case "redis.call", "redis.pcall", "cjson.decode", "cmsgpack.unpack":
			return true
		}
	}
	return false
}

// number: e is a bounded number: a literal (at most MaxLiteral), the length of a source, a
// bounded name, or a sum, difference, or quotient or remainder by a literal, of those.
func number(e ast.Expr, bounded, sources map[string]bool) bool {
	switch e := e.(type) {
	case *ast.NumberExpr:
		v, ok := literal(e)
		return ok && v >= -MaxLiteral && v <= MaxLiteral
	case *ast.IdentExpr:
		return bounded[e.Value]
	case *ast.UnaryLenOpExpr:
		return source(e.Expr, sources)
	case *ast.UnaryMinusOpExpr:
		return number(e.Expr, bounded, sources)
	case *ast.ArithmeticOpExpr:
		switch e.Operator {
		case "+", "-":
			return number(e.Lhs, bounded, sources) && number(e.Rhs, bounded, sources)
		case "/", "%":
			return number(e.Lhs, bounded, sources) && literalStep(e.Rhs)
		}
	}
	return false
}

// walkable checks a generic for's iterator: ipairs(t), pairs(t) or next, t of a source t, or a
// string's gmatch.
func (c *checker) walkable(s *ast.GenericForStmt) error {
	var table ast.Expr
	switch {
	case len(s.Exprs) == 1:
		call, ok := s.Exprs[0].(*ast.FuncCallExpr)
		if !ok {
			return fmt.Errorf("%s: a for loop over something other than ipairs, pairs or gmatch", at(s))
		}
		if call.Receiver != nil && call.Method == "gmatch" {
			return nil // a string's matches: no more than its length
		}
		switch name := funcName(call); name {
		case "string.gmatch":
			return nil
		case "ipairs", "pairs":
			if len(call.Args) != 1 {
				return fmt.Errorf("%s: %s with %d arguments", at(s), name, len(call.Args))
			}
			table = call.Args[0]
		default:
			return fmt.Errorf("%s: a for loop over an iterator other than ipairs, pairs or gmatch", at(s))
		}
	case len(s.Exprs) == 2:
		if id, ok := s.Exprs[0].(*ast.IdentExpr); !ok || id.Value != "next" {
			return fmt.Errorf("%s: a for loop over an iterator other than ipairs, pairs or gmatch", at(s))
		}
		table = s.Exprs[1]
	default:
		return fmt.Errorf("%s: a for loop over an iterator other than ipairs, pairs or gmatch", at(s))
	}
	if !source(table, c.f.sources) {
		return fmt.Errorf("%s: a for loop over a table that is not the arguments, a reply or decoded from one (or is written to)", at(s))
	}
	return nil
}

// children are the expressions directly within e.
func children(e ast.Expr) []ast.Expr {
	switch e := e.(type) {
	case *ast.AttrGetExpr:
		return []ast.Expr{e.Object, e.Key}
	case *ast.TableExpr:
		var out []ast.Expr
		for _, f := range e.Fields {
			out = append(out, f.Key, f.Value)
		}
		return out
	case *ast.FuncCallExpr:
		return append([]ast.Expr{e.Func, e.Receiver}, e.Args...)
	case *ast.LogicalOpExpr:
		return []ast.Expr{e.Lhs, e.Rhs}
	case *ast.RelationalOpExpr:
		return []ast.Expr{e.Lhs, e.Rhs}
	case *ast.StringConcatOpExpr:
		return []ast.Expr{e.Lhs, e.Rhs}
	case *ast.ArithmeticOpExpr:
		return []ast.Expr{e.Lhs, e.Rhs}
	case *ast.UnaryMinusOpExpr:
		return []ast.Expr{e.Expr}
	case *ast.UnaryNotOpExpr:
		return []ast.Expr{e.Expr}
	case *ast.UnaryLenOpExpr:
		return []ast.Expr{e.Expr}
	}
	return nil
}
