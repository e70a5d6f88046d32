package luabound

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"

	"seckill-proxy/internal/luacanon"
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

// Fuel returns src rewritten to stop once its bodies have cost units, with what the script
// may cost in all, or why it cannot be: it does not parse, or does something no fuel bounds.
func Fuel(src string, units int) (string, Bound, error) {
	if units <= 0 {
		return "", Bound{}, fmt.Errorf("loop fuel is off")
	}
	chunk, f, tokens, err := check(src, true)
	if err != nil {
		return "", Bound{}, err
	}
	w, bound, err := costOf(chunk, f, units, tokens)
	if err != nil {
		return "", Bound{}, err
	}
	header, body := "", src
	if strings.HasPrefix(src, "#!") { // the shebang line stays the first
		i := strings.IndexByte(src, '\n')
		if i < 0 {
			return src, bound, nil // flags and no code
		}
		header, body = src[:i+1], src[i+1:]
	}
	at, err := stepPlaces(body)
	if err != nil {
		return "", Bound{}, err
	}
	if len(at) != len(w.order) {
		return "", Bound{}, fmt.Errorf("the fuel found %d loop and function bodies in the text and %d in the tree", len(at), len(w.order))
	}
	weights := make([]int, len(at))
	steps := make([]string, len(at))
	size := len(src) + 256
	for i, fr := range w.order {
		weights[i] = int(math.Ceil(max(1, fr.weight.constant())))
		steps[i] = " " + fuelCounter + "=" + fuelCounter + "-" + strconv.Itoa(weights[i]) + " if " + fuelCounter + "<0 then " + fuelError + "(" + fuelStop + ") end "
		size += len(steps[i])
	}
	if size > MaxFueled {
		return "", Bound{}, fmt.Errorf("the script has %d loops and functions: fueled, it would be over %d bytes", len(at), MaxFueled)
	}
	limit := strconv.Itoa(units)
	var b strings.Builder
	b.Grow(size)
	b.WriteString(header)
	b.WriteString("local " + fuelCounter + "," + fuelError + "," + fuelStop + "=" + limit + ",error,{err='" +
		FuelError + " " + limit + " units (redis.app_script_fuel): it loops on a value, which could hold its master'} ")
	last := 0
	for i, off := range at {
		b.WriteString(body[last:off])
		b.WriteString(steps[i])
		last = off
	}
	b.WriteString(body[last:])
	out := b.String()
	if err := counted(out, weights); err != nil {
		return "", Bound{}, err
	}
	return out, bound, nil
}

// stepPlaces are the offsets in body just past which a step is taken: after each do and
// repeat, and after a function's parameter list.
func stepPlaces(body string) ([]int, error) {
	toks, err := luacanon.Tokens(body)
	if err != nil {
		return nil, fmt.Errorf("the script does not parse: %v", err)
	}
	var at []int
	for i, t := range toks {
		switch {
		case !t.Keyword && strings.HasPrefix(t.Text, FuelPrefix):
			return nil, fmt.Errorf("the script names %s, a name the proxy's loop fuel uses", t.Text)
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
	return at, nil
}

// counted checks a fueled script's tree, whatever the lexer that placed the steps got wrong:
// every loop body and function body must start by taking from the counter, in the text's
// order, at least the weight the cost model gave it.
func counted(src string, weights []int) error {
	chunk, err := parseScript(src, "the fueled script")
	if err != nil {
		return err
	}
	w := &stepWalk{}
	w.stmts(chunk)
	if w.err != nil {
		return w.err
	}
	if len(w.taken) != len(weights) {
		return fmt.Errorf("the fueled script takes steps in %d bodies, not %d", len(w.taken), len(weights))
	}
	for i, n := range w.taken {
		if n < weights[i] {
			return fmt.Errorf("the fueled script's body %d takes %d units for a weight of %d", i+1, n, weights[i])
		}
	}
	return nil
}

// stepWalk finds a loop or function body that does not take a step, and what each takes.
type stepWalk struct {
	err   error
	taken []int
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
