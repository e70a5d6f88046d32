package resp

import (
	"bytes"
	"errors"
)

// ErrReply is a reply from Redis that is not RESP.
var ErrReply = errors.New("resp: malformed reply")

// ReplyScanner finds where each reply ends in a stream of replies from Redis (RESP2 and
// RESP3), keeping its place across reads, so that a reply arriving in many pieces (an array
// of a million elements, say) is scanned once, not once per piece. It does not copy or decode.
// Its zero value is ready to use; it is not safe for concurrent use.
type ReplyScanner struct {
	pos  int     // how much of the current reply has been scanned
	left []int64 // elements still to come, at each open aggregate
	need int     // the current reply is at least this long, as far as is known
}

// reset forgets a reply half scanned.
func (s *ReplyScanner) reset() { s.pos, s.left, s.need = 0, s.left[:0], 0 }

// Need is how long the current reply is at least, as far as the last Scan could tell (the
// end of the bulk string it waits for): a reader may grow its buffer to it at once.
func (s *ReplyScanner) Need() int { return s.need }

// Scan looks at buf, which begins with the current reply (what the last call saw, and what
// came since), and returns its length once it is complete; 0 while it is not.
func (s *ReplyScanner) Scan(buf []byte) (int, error) {
	for {
		if s.pos >= len(buf) {
			return 0, nil
		}
		i := bytes.IndexByte(buf[s.pos:], '\n')
		if i < 0 {
			return 0, nil
		}
		end := s.pos + i + 1 // after the header line
		if i < 2 || buf[end-2] != '\r' {
			return 0, ErrReply
		}
		end, elems, err := s.element(buf, end)
		if err != nil || end == 0 {
			return 0, err
		}
		s.pos = end
		if elems > 0 {
			s.left = append(s.left, elems)
			continue
		}
		if s.closeElement() {
			n := s.pos
			s.pos, s.need = 0, 0
			return n, nil
		}
	}
}

// element reads the header line buf[s.pos:end]: the end of its element (past a bulk string's
// body; 0 while the body has not all come), and the elements of an aggregate (-1: a scalar,
// or an aggregate empty or null).
func (s *ReplyScanner) element(buf []byte, end int) (int, int64, error) {
	typ, arg := buf[s.pos], buf[s.pos+1:end-2]
	switch typ {
	case '+', '-', ':', ',', '(', '#', '_':
		return end, -1, nil
	case '$', '!', '=':
		n, ok := parseInt(arg)
		if !ok || n < -1 {
			return 0, 0, ErrReply
		}
		if n < 0 {
			return end, -1, nil
		}
		if int64(len(buf)-end) < n+2 {
			s.need = end + int(n) + 2
			return 0, 0, nil // the header is scanned again next time: O(1)
		}
		end += int(n) + 2
		if buf[end-2] != '\r' || buf[end-1] != '\n' {
			return 0, 0, ErrReply // the bulk's length is not its length: out of step
		}
		return end, -1, nil
	case '*', '~', '>', '%', '|':
		n, ok := parseInt(arg)
		switch {
		case !ok || n < -1:
			return 0, 0, ErrReply
		case n <= 0:
			return end, -1, nil // empty or null
		case typ == '%':
			return end, 2 * n, nil
		case typ == '|': // an attribute: its pairs, then the reply it is about
			return end, 2*n + 1, nil
		}
		return end, n, nil
	}
	return 0, 0, ErrReply
}

// closeElement counts one element done and closes the aggregates it completes: true when the
// reply is complete.
func (s *ReplyScanner) closeElement() bool {
	for len(s.left) > 0 {
		top := len(s.left) - 1
		if s.left[top]--; s.left[top] > 0 {
			break
		}
		s.left = s.left[:top]
	}
	return len(s.left) == 0
}
