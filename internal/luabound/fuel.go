package luabound

import (
	"fmt"

	"github.com/yuin/gopher-lua/ast"
)

// Loop fuel: a script that Check refuses only for how it loops or calls (a while, a for
// bounded by a value, recursion) may still run, rewritten so that it pays for each step and
// stops when its fuel is spent. Fuel declares a counter at the script's top, and takes from it
// first thing in every loop body (after each do and repeat) and every function body (after its
// parameters) what one run of that body costs in the cost model's units (cost.go: a Redis call
// 32, a statement 1, a match by its pattern, ...), the bodies within it aside; below zero, the
// script raises an error. Every repetition in Lua 5.1 goes through one of those (5.1 has no
// goto), so a fueled script's bodies cost at most its fuel in all. What it wrote before it
// stopped stays written, as with any script that fails midway.
//
// What the counter cannot bound is still refused, as Check refuses it: string.rep with a
// count that is not a literal, load, setmetatable and the rest of unsafe; a pattern that
// backtracks over a value read from Redis; a string grown on each step of a loop the fuel
// counts. A script that names the counter (any name that starts with FuelPrefix) is refused
// too: it could refill it. What a body does that the input sizes (a match over an argument)
// is in the script's Bound, for each step the fuel allows.
//
// A pcall inside the script may catch the error; the counter stays below zero, so the next
// step of any loop or call raises it again, and the script can only end.

// FuelPrefix starts the names Fuel declares; a script that uses such a name is refused.
const FuelPrefix = "__seckill_"

const (
	fuelCounter = FuelPrefix + "fuel"
	fuelError   = FuelPrefix + "error"
	fuelStop    = FuelPrefix + "stop"
)

// MaxFueled is the longest fueled script Fuel makes: one of many tiny loops grows by some 70
// bytes a loop, and a proxy keeps the fueled texts it made.
const MaxFueled = 2 << 20

// FuelError is the start of the error a fueled script raises when its steps run out.
const FuelError = "ERR script stopped by seckill-proxy after"

// stepWalk finds a loop or function body that does not take a step, and what each takes.
type stepWalk struct {
	err   error
	taken []int
	meter bool // metered: redis.call and redis.pcall may not be named
}

func (w *stepWalk) body(n ast.PositionHolder, ss []ast.Stmt) {
	if w.err != nil {
		return
	}
	if len(ss) > 0 {
		if a, ok := ss[0].(*ast.AssignStmt); ok && len(a.Lhs) == 1 && len(a.Rhs) == 1 {
			id, ok := a.Lhs[0].(*ast.IdentExpr)
			sub, ok2 := a.Rhs[0].(*ast.ArithmeticOpExpr)
			if ok && ok2 && id.Value == fuelCounter && sub.Operator == "-" {
				if from, ok := sub.Lhs.(*ast.IdentExpr); ok && from.Value == fuelCounter {
					if n, ok := sub.Rhs.(*ast.NumberExpr); ok {
						v, _ := literal(n)
						w.taken = append(w.taken, int(v))
						w.stmts(ss)
						return
					}
				}
			}
		}
	}
	w.err = fmt.Errorf("%s: a loop or function the fuel does not count", at(n))
}

func (w *stepWalk) stmts(ss []ast.Stmt) {
	for _, s := range ss {
		w.stmt(s)
	}
}

func (w *stepWalk) stmt(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.WhileStmt:
		w.expr(s.Condition)
		w.body(s, s.Stmts)
	case *ast.RepeatStmt:
		w.body(s, s.Stmts)
		w.expr(s.Condition)
	case *ast.NumberForStmt:
		w.exprs(s.Init, s.Limit, s.Step)
		w.body(s, s.Stmts)
	case *ast.GenericForStmt:
		w.exprs(s.Exprs...)
		w.body(s, s.Stmts)
	case *ast.AssignStmt:
		w.exprs(append(append([]ast.Expr{}, s.Lhs...), s.Rhs...)...)
	case *ast.LocalAssignStmt:
		w.exprs(s.Exprs...)
	case *ast.FuncCallStmt:
		w.expr(s.Expr)
	case *ast.DoBlockStmt:
		w.body(s, s.Stmts)
	case *ast.IfStmt:
		w.expr(s.Condition)
		w.stmts(s.Then)
		w.stmts(s.Else)
	case *ast.FuncDefStmt:
		w.expr(s.Func)
	case *ast.ReturnStmt:
		w.exprs(s.Exprs...)
	}
}

func (w *stepWalk) exprs(es ...ast.Expr) {
	for _, e := range es {
		w.expr(e)
	}
}

func (w *stepWalk) expr(e ast.Expr) {
	switch e := e.(type) {
	case *ast.FunctionExpr:
		w.body(e, e.Stmts)
	case *ast.AttrGetExpr:
		if w.meter && redisFunction(e) && w.err == nil {
			w.err = fmt.Errorf("%s: redis.%s is named past the meter", at(e), e.Key.(*ast.StringExpr).Value)
		}
		w.exprs(e.Object, e.Key)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			w.exprs(f.Key, f.Value)
		}
	case *ast.FuncCallExpr:
		w.exprs(e.Func, e.Receiver)
		w.exprs(e.Args...)
	case *ast.LogicalOpExpr:
		w.exprs(e.Lhs, e.Rhs)
	case *ast.RelationalOpExpr:
		w.exprs(e.Lhs, e.Rhs)
	case *ast.StringConcatOpExpr:
		w.exprs(e.Lhs, e.Rhs)
	case *ast.ArithmeticOpExpr:
		w.exprs(e.Lhs, e.Rhs)
	case *ast.UnaryMinusOpExpr:
		w.expr(e.Expr)
	case *ast.UnaryNotOpExpr:
		w.expr(e.Expr)
	case *ast.UnaryLenOpExpr:
		w.expr(e.Expr)
	}
}
