// Package luabound decides whether a Redis Lua script ends in time bounded by what it is
// given: its arguments, and what Redis answers it. A script that loops on a value (while true,
// for i = 1, ARGV[1], a counter read from a key) can hold its master for as long as the value
// says, and Redis answers BUSY to every client meanwhile; one whose every loop walks its
// arguments or a reply, or counts to a literal, cannot.
//
// Check parses the script (Lua 5.1, gopher-lua's parser) and accepts it only if:
//   - it has no while, repeat or goto;
//   - each numeric for runs from and to bounds made of literals (at most MaxLiteral), #ARGV,
//     #KEYS, the length of an argument or a reply, and names only ever given such numbers
//     (local n = (#ARGV - 3) / 4), added or subtracted, or divided by a literal; its step is
//     a literal;
//   - each generic for walks ipairs(t), pairs(t) or next, t of the arguments, a reply or what
//     cjson or cmsgpack decoded (or a name only ever given those, whose table nothing writes
//     to), or a string's gmatch: no table the script builds, which a loop could double;
//   - no function it defines calls a function value other than Redis's and Lua's libraries
//     (so no recursion, direct or not), while the chunk itself may call its functions;
//   - it names none of what hides calls or loops from the text: load, loadstring, dofile,
//     setmetatable, getmetatable, setfenv, getfenv, coroutine, debug, _G, newproxy; and
//     string.rep only with a literal count.
//
// What it accepts may still do much work per input item; what it refuses may be harmless. The
// rules say what is certain: the number of steps is bounded by a function of the script's
// input sizes and literals.
package luabound

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"

	"seckill-proxy/internal/luacanon"
)

// MaxLiteral is the largest literal a loop bound may be.
const MaxLiteral = 1 << 20

// MaxSource is the largest script Check reads: a longer one is refused unread.
const MaxSource = 1 << 20

// MaxTokens and MaxDepth bound the scripts Check parses: a longer or deeper one is refused
// from one pass over its text that keeps nothing, before the parser builds a tree (whose size
// grows with the tokens, and whose recursion with the depth). Redisson's longest scripts have
// a few thousand tokens and nest below 10; Redis's own parser refuses 200 levels.
const (
	MaxTokens = 20000
	MaxDepth  = 100
)

// shape refuses a script over MaxTokens or MaxDepth; its tokens, for the judge's own budget.
func shape(src string) (int, error) {
	body := strings.TrimPrefix(src, "\uFEFF")
	if strings.HasPrefix(body, "#!") {
		body = body[min(len(body), strings.IndexByte(body+"\n", '\n')):]
	}
	tokens, _, err := luacanon.Shape(body, MaxTokens, MaxDepth)
	switch {
	case err == luacanon.ErrTooBig && tokens > MaxTokens:
		return 0, fmt.Errorf("the script has over %d tokens", MaxTokens)
	case err == luacanon.ErrTooBig:
		return 0, fmt.Errorf("the script nests blocks and brackets over %d deep", MaxDepth)
	case err != nil:
		return 0, fmt.Errorf("the script does not parse: %v", err)
	}
	return tokens, nil
}

// Check returns nil if src has a cost bound within the budget (Analyse), or why it has not.
func Check(src string) error {
	_, err := Analyse(src)
	return err
}

// Analyse is what src can cost (cost.go), if it ends in time bounded by its input with no
// fuel, or why it may not. A call of it may still cost more than its input allows: Bound.Allows
// says, for each call.
func Analyse(src string) (Bound, error) {
	chunk, f, tokens, err := check(src, false)
	if err != nil {
		return Bound{}, err
	}
	_, b, err := costOf(chunk, f, 0, tokens)
	return b, err
}

// check parses src and checks its shape: with fuel, loops and calls of function values pass
// (Fuel counts them). tokens is the script's count of tokens, which the cost model's own work
// is bounded by.
func check(src string, fuel bool) ([]ast.Stmt, *facts, int, error) {
	if len(src) > MaxSource {
		return nil, nil, 0, fmt.Errorf("the script is over %d bytes", MaxSource)
	}
	tokens, err := shape(src)
	if err != nil {
		return nil, nil, 0, err
	}
	if err := shebangFlags(src); err != nil {
		return nil, nil, 0, err
	}
	chunk, err := parseScript(src, "the script")
	if err != nil {
		return nil, nil, 0, err
	}
	c := &checker{f: learn(chunk), fuel: fuel}
	if err := c.stmts(chunk, false); err != nil {
		return nil, nil, 0, err
	}
	return chunk, c.f, tokens, nil
}

// shebangFlags refuses a Redis 7 shebang line (#!lua flags=...) whose flags lift a master's
// own limits: allow-oom lets the script write past maxmemory.
func shebangFlags(src string) error {
	src = strings.TrimPrefix(src, "\uFEFF")
	if !strings.HasPrefix(src, "#!") {
		return nil
	}
	line, _, _ := strings.Cut(src, "\n")
	for _, field := range strings.Fields(line) {
		flags, ok := strings.CutPrefix(field, "flags=")
		if !ok {
			continue
		}
		for _, f := range strings.Split(flags, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "allow-oom") {
				return errors.New("line 1: the shebang flag allow-oom, which lets the script write past its master's maxmemory")
			}
		}
	}
	return nil
}

// parseScript parses src as Redis reads a script (a byte order mark and Redis 7's shebang line
// of flags are not code); what names it in an error.
func parseScript(src, what string) (chunk []ast.Stmt, err error) {
	src = strings.TrimPrefix(src, "\uFEFF")
	if strings.HasPrefix(src, "#!") {
		src = "--" + src[min(len(src), strings.IndexByte(src+"\n", '\n')):]
	}
	defer func() {
		if r := recover(); r != nil {
			chunk, err = nil, fmt.Errorf("%s does not parse: %v", what, r)
		}
	}()
	chunk, err = parse.Parse(strings.NewReader(src), "script")
	if err != nil {
		return nil, fmt.Errorf("%s does not parse: %v", what, oneLine(err.Error()))
	}
	return chunk, nil
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// checker walks a script's tree; with fuel, it lets loops of any kind and calls of function
// values pass, and checks only what no count of steps can bound (string.rep of a value, load,
// goto, ...).
type checker struct {
	f    *facts
	fuel bool
}

// unsafe are globals that hide calls or loops from the text.
var unsafe = map[string]bool{
	"load": true, "loadstring": true, "dofile": true, "loadfile": true, "setmetatable": true,
	"getmetatable": true, "setfenv": true, "getfenv": true, "coroutine": true, "debug": true,
	"_G": true, "newproxy": true, "module": true, "require": true,
}

// libraries are the tables of functions a function body may call.
var libraries = map[string]bool{
	"redis": true, "string": true, "table": true, "math": true, "cjson": true, "cmsgpack": true,
	"bit": true, "struct": true, "os": true,
}

// builtins are the global functions a function body may call. pcall and xpcall call their
// first argument, which must be one of these or a library's function too.
var builtins = map[string]bool{
	"tonumber": true, "tostring": true, "type": true, "unpack": true, "ipairs": true,
	"pairs": true, "next": true, "select": true, "assert": true, "error": true, "rawget": true,
	"rawequal": true, "rawset": true, "pcall": true, "xpcall": true,
}

func at(n ast.PositionHolder) string { return "line " + strconv.Itoa(n.Line()) }

func (c *checker) stmts(ss []ast.Stmt, inFunc bool) error {
	for _, s := range ss {
		if err := c.stmt(s, inFunc); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) stmt(s ast.Stmt, inFunc bool) error {
	switch s := s.(type) {
	case *ast.WhileStmt:
		if c.fuel {
			return c.loop(s.Condition, s.Stmts, inFunc)
		}
		return fmt.Errorf("%s: a while loop (its end depends on values, not on the input's size)", at(s))
	case *ast.RepeatStmt:
		if c.fuel {
			return c.loop(s.Condition, s.Stmts, inFunc)
		}
		return fmt.Errorf("%s: a repeat loop (its end depends on values, not on the input's size)", at(s))
	case *ast.GotoStmt, *ast.LabelStmt:
		return fmt.Errorf("%s: goto", at(s))
	case *ast.AssignStmt:
		return c.exprs(append(append([]ast.Expr{}, s.Lhs...), s.Rhs...), inFunc)
	case *ast.LocalAssignStmt:
		return c.exprs(s.Exprs, inFunc)
	case *ast.FuncCallStmt:
		return c.expr(s.Expr, inFunc)
	case *ast.DoBlockStmt:
		return c.stmts(s.Stmts, inFunc)
	case *ast.IfStmt:
		if err := c.expr(s.Condition, inFunc); err != nil {
			return err
		}
		return c.stmts(append(append([]ast.Stmt{}, s.Then...), s.Else...), inFunc)
	case *ast.NumberForStmt:
		return c.numberFor(s, inFunc)
	case *ast.GenericForStmt:
		if err := c.exprs(s.Exprs, inFunc); err != nil {
			return err
		}
		if err := c.walkable(s); err != nil && !c.fuel {
			return err
		}
		return c.stmts(s.Stmts, inFunc)
	case *ast.FuncDefStmt:
		if s.Name != nil && s.Name.Func != nil {
			if err := c.expr(s.Name.Func, inFunc); err != nil {
				return err
			}
		}
		return c.function(s.Func)
	case *ast.ReturnStmt:
		return c.exprs(s.Exprs, inFunc)
	case *ast.BreakStmt:
		return nil
	}
	return fmt.Errorf("%s: a statement this check does not know (%T)", at(s), s)
}

// numberFor checks a numeric for loop: with fuel, any; without, bounds of the input's size
// and a literal step.
func (c *checker) numberFor(s *ast.NumberForStmt, inFunc bool) error {
	if c.fuel {
		if err := c.exprs([]ast.Expr{s.Init, s.Limit, s.Step}, inFunc); err != nil {
			return err
		}
		return c.stmts(s.Stmts, inFunc)
	}
	for _, e := range []ast.Expr{s.Init, s.Limit} {
		if !number(e, c.f.bounded, c.f.sources) {
			return fmt.Errorf("%s: a for loop whose bounds are not literals, #ARGV, #KEYS, the length of an argument or a reply, or names given only those", at(s))
		}
	}
	if s.Step != nil && !literalStep(s.Step) {
		return fmt.Errorf("%s: a for loop whose step is not a literal", at(s))
	}
	return c.stmts(s.Stmts, inFunc)
}

// loop checks a while or repeat loop's condition and body (with fuel).
func (c *checker) loop(cond ast.Expr, body []ast.Stmt, inFunc bool) error {
	if err := c.expr(cond, inFunc); err != nil {
		return err
	}
	return c.stmts(body, inFunc)
}

func (c *checker) exprs(es []ast.Expr, inFunc bool) error {
	for _, e := range es {
		if err := c.expr(e, inFunc); err != nil {
			return err
		}
	}
	return nil
}

// function checks a function's body: it may call only the libraries' functions.
func (c *checker) function(f *ast.FunctionExpr) error {
	return c.stmts(f.Stmts, true)
}

func (c *checker) expr(e ast.Expr, inFunc bool) error {
	switch e := e.(type) {
	case nil, *ast.TrueExpr, *ast.FalseExpr, *ast.NilExpr, *ast.NumberExpr, *ast.StringExpr, *ast.Comma3Expr:
		return nil
	case *ast.IdentExpr:
		if unsafe[e.Value] {
			return fmt.Errorf("%s: %s", at(e), e.Value)
		}
		return nil
	case *ast.AttrGetExpr:
		if name, ok := libFunc(e); ok && name == "string.rep" {
			return fmt.Errorf("%s: string.rep, whose work is its count", at(e))
		}
		return c.exprs([]ast.Expr{e.Object, e.Key}, inFunc)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			if err := c.exprs([]ast.Expr{f.Key, f.Value}, inFunc); err != nil {
				return err
			}
		}
		return nil
	case *ast.FuncCallExpr:
		return c.call(e, inFunc)
	case *ast.LogicalOpExpr:
		return c.exprs([]ast.Expr{e.Lhs, e.Rhs}, inFunc)
	case *ast.RelationalOpExpr:
		return c.exprs([]ast.Expr{e.Lhs, e.Rhs}, inFunc)
	case *ast.StringConcatOpExpr:
		return c.exprs([]ast.Expr{e.Lhs, e.Rhs}, inFunc)
	case *ast.ArithmeticOpExpr:
		return c.exprs([]ast.Expr{e.Lhs, e.Rhs}, inFunc)
	case *ast.UnaryMinusOpExpr:
		return c.expr(e.Expr, inFunc)
	case *ast.UnaryNotOpExpr:
		return c.expr(e.Expr, inFunc)
	case *ast.UnaryLenOpExpr:
		return c.expr(e.Expr, inFunc)
	case *ast.FunctionExpr:
		return c.function(e)
	}
	return fmt.Errorf("an expression this check does not know (%T)", e)
}

// call checks a call: inside a function, of a library's function or a builtin only.
func (c *checker) call(e *ast.FuncCallExpr, inFunc bool) error {
	if e.Receiver != nil { // s:method(...): a string's, or a table's field
		if e.Method == "rep" && !literalArgs(e.Args) {
			return fmt.Errorf("%s: :rep, whose work is its count", at(e))
		}
		if inFunc && !c.fuel && !stringMethods[e.Method] {
			return fmt.Errorf("%s: a function calls %s, a function value: recursion cannot be ruled out", at(e), e.Method)
		}
		if err := c.expr(e.Receiver, inFunc); err != nil {
			return err
		}
		return c.exprs(e.Args, inFunc)
	}
	if name, ok := libFunc(e.Func); ok && name == "string.rep" {
		if !literalArgs(e.Args) {
			return fmt.Errorf("%s: string.rep with a count that is not a literal", at(e))
		}
		return c.exprs(e.Args, inFunc)
	}
	if err := c.expr(e.Func, inFunc); err != nil {
		return err
	}
	if inFunc && !c.fuel && !knownFunc(e.Func) {
		return fmt.Errorf("%s: a function calls a function value: recursion cannot be ruled out", at(e))
	}
	if id, ok := e.Func.(*ast.IdentExpr); ok && (id.Value == "pcall" || id.Value == "xpcall") && inFunc && !c.fuel && len(e.Args) > 0 {
		if _, isFunc := e.Args[0].(*ast.FunctionExpr); !isFunc && !knownFunc(e.Args[0]) {
			return fmt.Errorf("%s: a function calls %s of a function value: recursion cannot be ruled out", at(e), id.Value)
		}
	}
	return c.exprs(e.Args, inFunc)
}

// stringMethods are the methods of strings: s:sub(1, 2) and the like.
var stringMethods = map[string]bool{
	"byte": true, "find": true, "format": true, "gmatch": true, "gsub": true, "len": true,
	"lower": true, "match": true, "reverse": true, "sub": true, "upper": true,
}

// knownFunc: e names a library's function or a builtin.
func knownFunc(e ast.Expr) bool {
	if id, ok := e.(*ast.IdentExpr); ok {
		return builtins[id.Value]
	}
	_, ok := libFunc(e)
	return ok
}

// libFunc names e if it is lib.name with lib a library's table.
func libFunc(e ast.Expr) (string, bool) {
	a, ok := e.(*ast.AttrGetExpr)
	if !ok {
		return "", false
	}
	lib, ok := a.Object.(*ast.IdentExpr)
	key, ok2 := a.Key.(*ast.StringExpr)
	if !ok || !ok2 || !libraries[lib.Value] {
		return "", false
	}
	return lib.Value + "." + key.Value, true
}

// literalStep: e is a non-zero number literal (or its negation) of at least 1 in size.
func literalStep(e ast.Expr) bool {
	if m, ok := e.(*ast.UnaryMinusOpExpr); ok {
		e = m.Expr
	}
	n, ok := e.(*ast.NumberExpr)
	if !ok {
		return false
	}
	v, ok := literal(n)
	return ok && v >= 1
}

// literal is a number literal's value (decimal or hexadecimal).
func literal(n *ast.NumberExpr) (float64, bool) {
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil {
		i, err2 := strconv.ParseInt(n.Value, 0, 64)
		v, err = float64(i), err2
	}
	return v, err == nil
}

// literalArgs: every argument is a literal, and numbers at most MaxLiteral.
func literalArgs(args []ast.Expr) bool {
	for _, a := range args {
		switch a.(type) {
		case *ast.StringExpr:
		case *ast.NumberExpr:
			if !number(a, nil, nil) {
				return false
			}
		default:
			return false
		}
	}
	return true
}
