package resp

// splitArgs splits an inline request line into arguments as Redis's sdssplitargs does:
// arguments apart by spaces; "double quotes" with \n, \r, \t, \b, \a, \xHH and \<any>
// escapes; 'single quotes' with \' only. A closing quote must be followed by a space or the
// end of the line; ok false when the quotes do not balance. line holds no NUL byte (the
// Reader waits for more at one, as Redis does). Arguments are appended to dst; those with
// quotes are unquoted into scratch, which is returned grown.
func splitArgs(dst [][]byte, scratch, line []byte) (args [][]byte, grown []byte, ok bool) {
	// scratch must not move while args point into it: room for the whole line.
	if cap(scratch) < len(line) {
		scratch = make([]byte, 0, len(line))
	}
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p == len(line) {
			return dst, scratch, true
		}
		start := p
		for p < len(line) && !endsArg(line[p]) && line[p] != '"' && line[p] != '\'' {
			p++
		}
		if p == len(line) || endsArg(line[p]) {
			dst = append(dst, line[start:p:p])
			continue
		}
		// Quotes in this argument: build it in scratch.
		from := len(scratch)
		x := inlineQuotes{line: line, p: p, out: append(scratch, line[start:p]...)}
		if !x.arg() {
			return nil, x.out, false
		}
		scratch, p = x.out, x.p
		dst = append(dst, scratch[from:len(scratch):len(scratch)])
	}
}

// inlineQuotes unquotes one argument of an inline line from p into out.
type inlineQuotes struct {
	line []byte
	p    int
	out  []byte
}

// at is the byte k past p, 0 past the line's end (the line holds no NUL byte).
func (x *inlineQuotes) at(k int) byte {
	if x.p+k < len(x.line) {
		return x.line[x.p+k]
	}
	return 0
}

// arg reads the argument up to its end; false when its quotes do not balance.
func (x *inlineQuotes) arg() bool {
	var quote byte // the quote the argument is in now, or 0
	for {
		c := x.at(0)
		done, ok := false, true
		if quote != 0 {
			done, ok = x.quoted(c, quote)
		} else {
			done, quote = x.plain(c)
		}
		if !ok {
			return false
		}
		if x.p < len(x.line) {
			x.p++
		}
		if done {
			return true
		}
	}
}

// plain takes c outside quotes: done at the argument's end, or the quote c opens.
func (x *inlineQuotes) plain(c byte) (done bool, quote byte) {
	switch {
	case c == 0 || endsArg(c):
		return true, 0
	case c == '"' || c == '\'':
		return false, c
	}
	x.out = append(x.out, c)
	return false, 0
}

// quoted takes c inside quote's quotes: "double" ones with \n, \r, \t, \b, \a, \xHH and
// \<any> escapes, 'single' ones with \' only.
func (x *inlineQuotes) quoted(c, quote byte) (done, ok bool) {
	double := quote == '"'
	switch {
	case double && c == '\\' && x.at(1) == 'x' && isHex(x.at(2)) && isHex(x.at(3)):
		x.out = append(x.out, hexVal(x.at(2))<<4|hexVal(x.at(3)))
		x.p += 3
	case double && c == '\\' && x.at(1) != 0:
		x.p++
		x.out = append(x.out, unescape(x.line[x.p]))
	case !double && c == '\\' && x.at(1) == '\'':
		x.p++
		x.out = append(x.out, '\'')
	case c == quote:
		return true, x.closes()
	case c == 0:
		return false, false
	default:
		x.out = append(x.out, c)
	}
	return false, true
}

// closes: the closing quote at p is followed by a space or the line's end.
func (x *inlineQuotes) closes() bool {
	n := x.at(1)
	return n == 0 || isSpace(n)
}

// unescape is the byte a backslash and e stand for inside double quotes.
func unescape(e byte) byte {
	switch e {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return e
}

// endsArg: an unquoted argument ends at these (and where the line does).
func endsArg(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// isSpace is C's isspace.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
