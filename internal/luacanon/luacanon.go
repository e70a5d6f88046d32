// Package luacanon reduces a Lua script to a canonical form, so that two scripts that differ
// only in how they are written compare equal: comments, whitespace, line breaks, semicolons,
// the quotes of a string, the spelling of a number, the names of locals, parentheses around a
// condition, and whether KEYS and ARGV are read directly or through a local that only names
// them (local key = KEYS[1], local n = tonumber(ARGV[1])).
//
// It works on Lua tokens, never on text, in time linear in the script. It does not run,
// parse or check the script: a script that is not valid Lua still gets a form, and the caller
// only compares forms. It has no state and is safe for concurrent use.
package luacanon

import (
	"errors"
	"strconv"
	"strings"
)

// MaxScript is the longest body Canonical looks at: no stock script is near it, and a body
// past it costs nothing to refuse.
const MaxScript = 64 << 10

// ErrTooLong is Canonical's answer for a body over MaxScript.
var ErrTooLong = errors.New("luacanon: script longer than MaxScript")

// ErrMalformed is Canonical's answer for a body that is not Lua's tokens: an unfinished
// string or long comment, or a byte Lua has no token for.
var ErrMalformed = errors.New("luacanon: not a sequence of Lua tokens")

// Canonical returns body's canonical form: its tokens, rewritten as the package comment says,
// separated by single spaces.
func Canonical(body string) (string, error) {
	if len(body) > MaxScript {
		return "", ErrTooLong
	}
	toks, err := lex(body)
	if err != nil {
		return "", err
	}
	toks = inlineAliases(toks)
	toks = dropDoubleToNumber(toks)
	toks = dropConditionParens(toks)
	toks = renameLocals(toks)
	var b strings.Builder
	for i, t := range toks {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.text)
	}
	return b.String(), nil
}

// statementStart: a token that may begin the statement after an expression, so that the
// expression before it is known to have ended.
func statementStart(toks []token, i int) bool {
	if i >= len(toks) {
		return true
	}
	t := toks[i]
	switch t.kind {
	case kName:
		return true
	case kKeyword:
		switch t.text {
		case "if", "local", "return", "for", "while", "repeat", "do", "end", "else", "elseif", "until", "function", "break", "goto":
			return true
		}
	}
	return false
}

// aliasAt matches an alias expression at toks[i]: KEYS[n], ARGV[n], tonumber() of one, or a
// local already known as an alias (or tonumber() of it). It returns the expression's length
// in toks and what it stands for; 0 if none is there.
func aliasAt(toks []token, i int, alias map[string][]token) (int, []token) {
	index := func(i int) bool {
		return i+3 < len(toks) && toks[i].kind == kName && (toks[i].text == "KEYS" || toks[i].text == "ARGV") &&
			toks[i+1].text == "[" && toks[i+2].kind == kNumber && toks[i+3].text == "]"
	}
	known := func(i int) []token {
		if i < len(toks) && toks[i].kind == kName && !isField(toks, i) {
			return alias[toks[i].text]
		}
		return nil
	}
	toNumber := i+2 < len(toks) && toks[i].kind == kName && toks[i].text == "tonumber" && toks[i+1].text == "("
	switch {
	case index(i):
		return 4, toks[i : i+4]
	case known(i) != nil:
		return 1, known(i)
	case toNumber && index(i+2) && i+6 < len(toks) && toks[i+6].text == ")":
		return 7, toks[i : i+7]
	case toNumber && known(i+2) != nil && i+3 < len(toks) && toks[i+3].text == ")":
		e := known(i + 2)
		if e[0].text == "tonumber" {
			return 4, e
		}
		return 4, append(append([]token{toks[i], toks[i+1]}, e...), toks[i+3])
	}
	return 0, nil
}

// inlineAliases replaces each local that only names KEYS[n] or ARGV[n] (or their tonumber)
// with what it names, and drops its declaration. A local that is assigned again, or declared
// twice, is left alone.
func inlineAliases(toks []token) []token {
	assigned := assignCounts(toks)
	alias := map[string][]token{}
	drop := make([]bool, len(toks))
	for i := 0; i < len(toks); i++ {
		if toks[i].text != "local" || toks[i].kind != kKeyword || i > 0 && toks[i-1].text == "local" {
			continue
		}
		names, exprs, j := aliasStatement(toks, i+1, alias, assigned)
		if names == nil {
			continue
		}
		for k, name := range names {
			alias[name] = exprs[k]
		}
		for k := i; k < j; k++ {
			drop[k] = true
		}
		i = j - 1
	}
	if len(alias) == 0 {
		return toks
	}
	out := make([]token, 0, len(toks))
	for i, t := range toks {
		if drop[i] {
			continue
		}
		if e, ok := alias[t.text]; ok && t.kind == kName && !isField(toks, i) {
			out = append(out, e...)
			continue
		}
		out = append(out, t)
	}
	return out
}

// nameList is the list of names at toks[j:] (name {, name}): the names' indexes, and the
// index after the list.
func nameList(toks []token, j int) ([]int, int) {
	var at []int
	for j < len(toks) && toks[j].kind == kName {
		at = append(at, j)
		j++
		if j < len(toks) && toks[j].text == "," {
			j++
			continue
		}
		break
	}
	return at, j
}

// assignCounts is how often each name is declared local or assigned.
func assignCounts(toks []token) map[string]int {
	declared := make([]bool, len(toks)) // the names that local statements declare
	for i, t := range toks {
		if t.kind == kKeyword && t.text == "local" {
			at, _ := nameList(toks, i+1)
			for _, j := range at {
				declared[j] = true
			}
		}
	}
	assigned := map[string]int{}
	for i, t := range toks {
		if t.kind == kName && !isField(toks, i) && (declared[i] || i+1 < len(toks) && toks[i+1].kind == kOp && toks[i+1].text == "=") {
			assigned[t.text]++
		}
	}
	return assigned
}

// aliasStatement reads the local statement whose names start at toks[j]: when each name is
// declared once and only names an alias (aliasAt), the names, what each names, and the index
// after the statement; else nil.
func aliasStatement(toks []token, j int, alias map[string][]token, assigned map[string]int) ([]string, [][]token, int) {
	at, j := nameList(toks, j)
	if len(at) == 0 || j >= len(toks) || toks[j].text != "=" {
		return nil, nil, 0
	}
	j++
	names := make([]string, len(at))
	exprs := make([][]token, len(at))
	for k, i := range at {
		names[k] = toks[i].text
		n, e := aliasAt(toks, j, alias)
		if n == 0 || assigned[names[k]] != 1 || alias[names[k]] != nil {
			return nil, nil, 0
		}
		exprs[k] = e
		j += n
		if k < len(at)-1 {
			if j >= len(toks) || toks[j].text != "," {
				return nil, nil, 0
			}
			j++
		}
	}
	if !statementStart(toks, j) {
		return nil, nil, 0
	}
	return names, exprs, j
}

// isField: toks[i] is a name after . or :, a field or method, never a variable.
func isField(toks []token, i int) bool {
	return i > 0 && toks[i-1].kind == kOp && (toks[i-1].text == "." || toks[i-1].text == ":")
}

// matching returns, for each opening bracket in toks, the index of the one that closes it
// (-1 for none, and for every other token), in one pass.
func matching(toks []token) []int {
	match := make([]int, len(toks))
	var open []int
	for i, t := range toks {
		match[i] = -1
		if t.kind != kOp {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			open = append(open, i)
		case ")", "]", "}":
			if len(open) > 0 {
				match[open[len(open)-1]] = i
				open = open[:len(open)-1]
			}
		}
	}
	return match
}

// dropDoubleToNumber turns tonumber(tonumber(x)) into tonumber(x): an inlined alias that was
// a tonumber, read through tonumber again.
func dropDoubleToNumber(toks []token) []token {
	match := matching(toks)
	drop := make([]bool, len(toks))
	for i := 0; i+3 < len(toks); i++ {
		if toks[i].kind == kName && toks[i].text == "tonumber" && !isField(toks, i) && toks[i+1].text == "(" &&
			toks[i+2].kind == kName && toks[i+2].text == "tonumber" && toks[i+3].text == "(" &&
			match[i+1] >= 0 && match[i+3] >= 0 && match[i+3]+1 == match[i+1] {
			drop[i], drop[i+1], drop[match[i+1]] = true, true, true
		}
	}
	return without(toks, drop)
}

// without returns toks less those marked in drop.
func without(toks []token, drop []bool) []token {
	out := make([]token, 0, len(toks))
	for i, t := range toks {
		if !drop[i] {
			out = append(out, t)
		}
	}
	return out
}

// dropConditionParens drops parentheses that wrap a whole condition: if (c) then, elseif (c)
// then, while (c) do.
func dropConditionParens(toks []token) []token {
	match := matching(toks)
	drop := make([]bool, len(toks))
	for i := 0; i+1 < len(toks); i++ {
		t := toks[i]
		if t.kind != kKeyword || (t.text != "if" && t.text != "elseif" && t.text != "while") || toks[i+1].text != "(" {
			continue
		}
		want := "then"
		if t.text == "while" {
			want = "do"
		}
		if j := match[i+1]; j >= 0 && j+1 < len(toks) && toks[j+1].kind == kKeyword && toks[j+1].text == want {
			drop[i+1], drop[j] = true, true
		}
	}
	return without(toks, drop)
}

// renameLocals names each local, function parameter and loop variable after the order in
// which it is first declared: _1, _2, ... Fields and globals keep their names.
func renameLocals(toks []token) []token {
	names := map[string]string{}
	for _, n := range declaredLocals(toks) {
		if _, ok := names[n]; !ok {
			names[n] = "_" + strconv.Itoa(len(names)+1)
		}
	}
	if len(names) == 0 {
		return toks
	}
	out := make([]token, len(toks))
	for i, t := range toks {
		if n, ok := names[t.text]; ok && t.kind == kName && !isField(toks, i) {
			t.text = n
		}
		out[i] = t
	}
	return out
}

// declaredLocals are the names that local statements, for loops and functions' parameters
// declare, in order, each as often as it is declared.
func declaredLocals(toks []token) []string {
	var out []string
	for i, t := range toks {
		if t.kind != kKeyword {
			continue
		}
		switch t.text {
		case "local", "for":
			j := i + 1
			if j < len(toks) && toks[j].text == "function" {
				j++
			}
			at, _ := nameList(toks, j)
			for _, k := range at {
				out = append(out, toks[k].text)
			}
		case "function":
			j := i + 1
			for j < len(toks) && toks[j].text != "(" {
				j++
			}
			for j++; j < len(toks) && toks[j].text != ")"; j++ {
				if toks[j].kind == kName {
					out = append(out, toks[j].text)
				}
			}
		}
	}
	return out
}

// Token is one of a script's tokens as Tokens reads it: its text (a string decoded and quoted
// one way, a number in one spelling), whether it is one of Lua's keywords, and the offset
// just past it in the script.
type Token struct {
	Text    string
	Keyword bool
	End     int
}

// Tokens are body's tokens, comments, whitespace and semicolons dropped, with where each
// ends, for a caller that rewrites the text at token boundaries (internal/luabound's fuel).
func Tokens(body string) ([]Token, error) {
	toks, err := lex(body)
	if err != nil {
		return nil, err
	}
	out := make([]Token, len(toks))
	for i, t := range toks {
		out[i] = Token{Text: t.text, Keyword: t.kind == kKeyword, End: t.end}
	}
	return out, nil
}

// Shape is how many tokens body has and how deeply its blocks and brackets nest, read in one
// pass that keeps no token: what a caller checks before it lets a parser build a tree.
// It stops, with ErrTooBig, once either passes its limit.
func Shape(body string, maxTokens, maxDepth int) (tokens, depth int, err error) {
	level := 0
	for i := 0; i < len(body); {
		t, ok, next, err := lexAt(body, i)
		if err != nil {
			return tokens, depth, err
		}
		i = next
		if !ok {
			continue
		}
		tokens++
		switch {
		case t.kind == kOp && (t.text == "(" || t.text == "[" || t.text == "{"),
			t.kind == kKeyword && (t.text == "function" || t.text == "do" || t.text == "then" || t.text == "repeat"):
			level++
		case t.kind == kOp && (t.text == ")" || t.text == "]" || t.text == "}"),
			t.kind == kKeyword && (t.text == "end" || t.text == "until"),
			t.kind == kKeyword && (t.text == "elseif" || t.text == "else"): // closes a then (else opens nothing)
			level--
		}
		if t.kind == kKeyword && t.text == "else" {
			level++
		}
		depth = max(depth, level)
		if tokens > maxTokens || depth > maxDepth {
			return tokens, depth, ErrTooBig
		}
	}
	return tokens, depth, nil
}

// ErrTooBig is Shape's answer for a script over its limits.
var ErrTooBig = errors.New("luacanon: the script is over its limits")
