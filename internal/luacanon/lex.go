package luacanon

import (
	"math"
	"strconv"
	"strings"
)

// The lexer: Lua 5.1's tokens, as Redis's scripting reads them. Comments, whitespace and
// semicolons are dropped; strings are decoded and spelled one way (luaQuote), numbers too
// (number), so that the rewrites in luacanon.go compare tokens, never text.

type kind uint8

const (
	kName kind = iota
	kKeyword
	kNumber
	kString
	kOp
)

type token struct {
	kind kind
	text string
	end  int // the offset just past the token in the script
}

var keywords = map[string]bool{
	"and": true, "break": true, "do": true, "else": true, "elseif": true, "end": true,
	"false": true, "for": true, "function": true, "goto": true, "if": true, "in": true,
	"local": true, "nil": true, "not": true, "or": true, "repeat": true, "return": true,
	"then": true, "true": true, "until": true, "while": true,
}

// lex splits body into tokens, dropping comments, whitespace and semicolons. Strings come
// out decoded and quoted one way; numbers in one spelling.
func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		t, ok, next, err := lexAt(s, i)
		if err != nil {
			return nil, err
		}
		if ok {
			toks = append(toks, t)
		}
		i = next
	}
	return toks, nil
}

// lexAt reads what starts at s[i]: a token (ok), or something dropped; next is where the
// next one starts.
func lexAt(s string, i int) (t token, ok bool, next int, err error) {
	c := s[i]
	switch {
	case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == ';':
		return token{}, false, i + 1, nil
	case c == '-' && i+1 < len(s) && s[i+1] == '-':
		next, err = comment(s, i+2)
		return token{}, false, next, err
	case isAlpha(c):
		j := i + 1
		for j < len(s) && (isAlpha(s[j]) || isDigit(s[j])) {
			j++
		}
		t = token{kName, s[i:j], j}
		if keywords[t.text] {
			t.kind = kKeyword
		}
	case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
		j := i + 1
		for j < len(s) && (isAlpha(s[j]) || isDigit(s[j]) || s[j] == '.' ||
			((s[j] == '-' || s[j] == '+') && strings.IndexByte("eEpP", s[j-1]) >= 0)) {
			j++
		}
		t = token{kNumber, number(s[i:j]), j}
	case c == '"' || c == '\'':
		str, end, ok := quoted(s, i)
		if !ok {
			return token{}, false, 0, ErrMalformed
		}
		t = token{kString, luaQuote(str), end}
	case c == '[':
		if t, err = bracket(s, i); err != nil {
			return token{}, false, 0, err
		}
	default:
		op := operator(s[i:])
		if op == "" {
			return token{}, false, 0, ErrMalformed
		}
		t = token{kOp, op, i + len(op)}
	}
	return t, true, t.end, nil
}

// comment skips a comment whose -- ends at i, a long one ([[...]], [==[...]==]) or to the
// line's end; it returns where the comment ends.
func comment(s string, i int) (int, error) {
	if level, ok := longBracket(s, i); ok {
		end, ok := closeLong(s, i+level+2, level)
		if !ok {
			return 0, ErrMalformed
		}
		return end, nil
	}
	for i < len(s) && s[i] != '\n' {
		i++
	}
	return i, nil
}

// bracket reads what starts with the [ at s[i]: a long string, or the operator [.
func bracket(s string, i int) (token, error) {
	level, ok := longBracket(s, i)
	if !ok {
		return token{kOp, "[", i + 1}, nil
	}
	start := i + level + 2
	end, ok := closeLong(s, start, level)
	if !ok {
		return token{}, ErrMalformed
	}
	body := s[start : end-level-2]
	if strings.HasPrefix(body, "\r\n") {
		body = body[2:]
	} else if strings.HasPrefix(body, "\n") {
		body = body[1:]
	}
	return token{kString, luaQuote(body), end}, nil
}

func isAlpha(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// operator is the longest Lua operator at the start of s, "" if none.
func operator(s string) string {
	for _, op := range []string{"...", "..", "==", "~=", "<=", ">=", "::", "<<", ">>", "//"} {
		if strings.HasPrefix(s, op) {
			return op
		}
	}
	if strings.IndexByte("+-*/%^#&~|<>=(){}[]:,.", s[0]) >= 0 {
		return s[:1]
	}
	return ""
}

// number spells a numeric literal one way: 1, 1.0, 0x1 and 1e0 all read "1".
func number(lit string) string {
	var f float64
	if len(lit) > 2 && lit[0] == '0' && (lit[1]|0x20) == 'x' && !strings.ContainsAny(lit, ".pP") {
		n, err := strconv.ParseUint(lit[2:], 16, 64)
		if err != nil {
			return lit
		}
		f = float64(n)
	} else if g, err := strconv.ParseFloat(lit, 64); err == nil {
		f = g
	} else {
		return lit
	}
	if f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// longBracket reports whether s[i:] opens a long bracket ([[, [=[, [==[ ...), and its level.
func longBracket(s string, i int) (int, bool) {
	if i >= len(s) || s[i] != '[' {
		return 0, false
	}
	j := i + 1
	for j < len(s) && s[j] == '=' {
		j++
	}
	if j < len(s) && s[j] == '[' {
		return j - i - 1, true
	}
	return 0, false
}

// closeLong finds the long bracket of level that closes at or after i, and returns the index
// just past it.
func closeLong(s string, i, level int) (int, bool) {
	closer := "]" + strings.Repeat("=", level) + "]"
	k := strings.Index(s[i:], closer)
	if k < 0 {
		return 0, false
	}
	return i + k + len(closer), true
}

// quoted decodes the short string that opens at s[i], and returns the index just past it.
func quoted(s string, i int) (string, int, bool) {
	q := s[i]
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == q:
			return b.String(), j + 1, true
		case c == '\n':
			return "", 0, false
		case c != '\\':
			b.WriteByte(c)
			continue
		}
		j++
		if j >= len(s) {
			return "", 0, false
		}
		switch e := s[j]; e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		default:
			if isDigit(e) {
				k := j
				for k < len(s) && k < j+3 && isDigit(s[k]) {
					k++
				}
				n, _ := strconv.Atoi(s[j:k])
				if n > 255 {
					return "", 0, false
				}
				b.WriteByte(byte(n))
				j = k - 1
				continue
			}
			b.WriteByte(e) // \\, \", \', a newline, and what Lua 5.1 passes through
		}
	}
	return "", 0, false
}

// luaQuote spells s as one Lua string literal, which lex reads back as s: double quotes, and
// a decimal escape for every byte that is not printable ASCII.
func luaQuote(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c >= 0x7f:
			b = append(b, '\\', '0'+c/100, '0'+c/10%10, '0'+c%10)
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}
