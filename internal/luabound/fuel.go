package luabound

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"

	"seckill-proxy/internal/luacanon"
)

// Loop fuel: a script that Check refuses only for how it loops or calls (a while, a for
// bounded by a value, recursion) may still run, rewritten so that it counts its steps and stops
// after a number of them. Fuel declares a counter at the script's top, and decrements it
// first thing in every loop body (after each do and repeat) and every function body (after its
// parameters); past zero, the script raises an error. Every repetition in Lua 5.1 goes
// through one of those (5.1 has no goto), so a fueled script runs at most steps loop
// bodies and function calls in all, each of them loop-free code and Redis calls. What it
// wrote before it stopped stays written, as with any script that fails midway.
//
// What the counter cannot bound is still refused, as Check refuses it: string.rep with a
// count that is not a literal, load, setmetatable and the rest of unsafe. A script that names
// the counter (any name that starts with FuelPrefix) is refused too: it could refill it.
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

// Fuel returns src rewritten to stop after steps loop bodies and function calls, or why it
// cannot be: it does not parse, or does something no count of steps bounds.
func Fuel(src string, steps int) (string, error) {
	if steps <= 0 {
		return "", fmt.Errorf("loop fuel is off")
	}
	if err := check(src, true); err != nil {
		return "", err
	}
	header, body := "", src
	if strings.HasPrefix(src, "#!") { // the shebang line stays the first
		i := strings.IndexByte(src, '\n')
		if i < 0 {
			return src, nil // flags and no code
		}
		header, body = src[:i+1], src[i+1:]
	}
	toks, err := luacanon.Tokens(body)
	if err != nil {
		return "", fmt.Errorf("the script does not parse: %v", err)
	}
	var at []int // where a step is counted: just past these offsets
	for i, t := range toks {
		switch {
		case !t.Keyword && strings.HasPrefix(t.Text, FuelPrefix):
			return "", fmt.Errorf("the script names %s, a name the proxy's loop fuel uses", t.Text)
		case t.Keyword && (t.Text == "do" || t.Text == "repeat"):
			at = append(at, t.End)
		case t.Keyword && t.Text == "function":
			for j := i + 1; j < len(toks); j++ {
				if !toks[j].Keyword && toks[j].Text == ")" {
					at = append(at, toks[j].End)
					break
				}
			}
		}
	}
	limit := strconv.Itoa(steps)
	step := " " + fuelCounter + "=" + fuelCounter + "-1 if " + fuelCounter + "<0 then " + fuelError + "(" + fuelStop + ") end "
	size := len(src) + 256 + len(at)*len(step)
	if size > MaxFueled {
		return "", fmt.Errorf("the script has %d loops and functions: fueled, it would be over %d bytes", len(at), MaxFueled)
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(header)
	b.WriteString("local " + fuelCounter + "," + fuelError + "," + fuelStop + "=" + limit + ",error,{err='" +
		FuelError + " " + limit + " steps (redis.app_script_fuel): it loops on a value, which could hold its master'} ")
	last := 0
	for _, off := range at {
		b.WriteString(body[last:off])
		b.WriteString(step)
		last = off
	}
	b.WriteString(body[last:])
	out := b.String()
	if err := counted(out); err != nil {
		return "", err
	}
	return out, nil
}

// counted checks a fueled script's tree, whatever the lexer that placed the steps got wrong:
// every loop body and function body must start by counting a step.
func counted(src string) error {
	chunk, err := parseScript(src, "the fueled script")
	if err != nil {
		return err
	}
	w := &stepWalk{}
	w.stmts(chunk)
	return w.err
}

// stepWalk finds a loop or function body that does not count a step.
type stepWalk struct{ err error }

func (w *stepWalk) body(n ast.PositionHolder, ss []ast.Stmt) {
	if w.err != nil {
		return
	}
	if len(ss) > 0 {
		if a, ok := ss[0].(*ast.AssignStmt); ok && len(a.Lhs) == 1 {
			if id, ok := a.Lhs[0].(*ast.IdentExpr); ok && id.Value == fuelCounter {
				w.stmts(ss)
				return
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
		w.stmts(s.Stmts)
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
