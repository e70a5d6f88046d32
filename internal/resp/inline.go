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
		scratch = append(scratch, line[start:p]...)
		inq, insq, done := false, false, false
		for !done {
			var c byte
			if p < len(line) {
				c = line[p]
			}
			next := func(k int) byte {
				if p+k < len(line) {
					return line[p+k]
				}
				return 0
			}
			switch {
			case inq:
				switch {
				case c == '\\' && next(1) == 'x' && isHex(next(2)) && isHex(next(3)):
					scratch = append(scratch, hexVal(next(2))<<4|hexVal(next(3)))
					p += 3
				case c == '\\' && next(1) != 0:
					p++
					switch e := line[p]; e {
					case 'n':
						scratch = append(scratch, '\n')
					case 'r':
						scratch = append(scratch, '\r')
					case 't':
						scratch = append(scratch, '\t')
					case 'b':
						scratch = append(scratch, '\b')
					case 'a':
						scratch = append(scratch, '\a')
					default:
						scratch = append(scratch, e)
					}
				case c == '"':
					if n := next(1); n != 0 && !isSpace(n) {
						return nil, scratch, false
					}
					done = true
				case c == 0:
					return nil, scratch, false
				default:
					scratch = append(scratch, c)
				}
			case insq:
				switch {
				case c == '\\' && next(1) == '\'':
					p++
					scratch = append(scratch, '\'')
				case c == '\'':
					if n := next(1); n != 0 && !isSpace(n) {
						return nil, scratch, false
					}
					done = true
				case c == 0:
					return nil, scratch, false
				default:
					scratch = append(scratch, c)
				}
			default:
				switch {
				case c == 0 || endsArg(c):
					done = true
				case c == '"':
					inq = true
				case c == '\'':
					insq = true
				default:
					scratch = append(scratch, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		dst = append(dst, scratch[from:len(scratch):len(scratch)])
	}
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
