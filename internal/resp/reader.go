// Package resp reads clients' requests as Redis does: RESP arrays of bulk strings, and inline
// commands, with Redis's own limits and error texts, checked as each header arrives. A Reader
// keeps its place between reads, so that a command arriving in many pieces costs time linear
// in its size, and its buffer grows with what the client has sent, never with what it
// declares.
//
// It does no I/O: the caller reads into Buffer and hands the count to Commit. It does not
// parse replies.
package resp

import (
	"bytes"
	"math"
)

// Redis's limits (server.h, networking.c).
const (
	// InlineMax is the longest inline request, and the longest header line of an array or a
	// bulk string (PROTO_INLINE_MAX_SIZE).
	InlineMax = 64 << 10
	// MaxMultibulk is the most elements a request array may declare (INT_MAX).
	MaxMultibulk = 1<<31 - 1
	// UnauthMultibulk and UnauthBulk are Redis 7's bounds for a client that must
	// authenticate and has not.
	UnauthMultibulk = 10
	UnauthBulk      = 16384
)

// ProtocolError is a malformed request. Its text is Redis's reply to it (without "ERR "); as
// in Redis, the connection is to be closed once that is written.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

var (
	errMbulkCount  = &ProtocolError{"too big mbulk count string"}
	errBulkCount   = &ProtocolError{"too big bulk count string"}
	errInline      = &ProtocolError{"too big inline request"}
	errMultibulk   = &ProtocolError{"invalid multibulk length"}
	errUnauthMbulk = &ProtocolError{"unauthenticated multibulk length"}
	errBulkLength  = &ProtocolError{"invalid bulk length"}
	errUnauthBulk  = &ProtocolError{"unauthenticated bulk length"}
	errUnbalanced  = &ProtocolError{"unbalanced quotes in request"}
)

// Command is one complete request. Args and Raw point into the Reader's buffer, and are valid
// until the next call to Buffer.
type Command struct {
	Args [][]byte
	// Raw is the request as the client sent it, when it was a RESP array (Inline false); an
	// inline request has no RESP form to pass on as it is.
	Raw    []byte
	Inline bool
}

// Reader reads requests from one client. Its zero value is not usable: use NewReader. It is
// not safe for concurrent use.
type Reader struct {
	maxBulk int64
	buf     []byte
	start   int  // the first byte of the command being read
	pos     int  // how far that command has been read
	last    int  // where the command Next returned last began, for Unread
	lent    bool // buf is the caller's (Lend)
	err     error

	// The array being read: elements still to come (0: none begun), the length of the bulk
	// string whose data comes next (-1: its header comes next), and where its elements are,
	// as offsets from start.
	left    int64
	bulkLen int64
	spans   []int
	args    [][]byte
	scratch []byte // an inline command's arguments, unquoted
}

// NewReader returns a Reader that refuses a bulk string longer than maxBulk (Redis's
// proto-max-bulk-len).
func NewReader(maxBulk int64) *Reader {
	return &Reader{maxBulk: maxBulk, bulkLen: -1}
}

// readSize is the least room Buffer offers.
const readSize = 64 << 10

// Buffer returns room at the end of the buffer for the caller to read into, at least n bytes
// (and at least 64 KiB). Reading into it, then Commit, adds to the input. It may move what has
// not been returned yet, which invalidates earlier Commands.
func (r *Reader) Buffer(n int) []byte {
	r.reserve(max(n, readSize))
	return r.buf[len(r.buf):cap(r.buf)]
}

// Commit adds the first n bytes of the last Buffer to the input.
func (r *Reader) Commit(n int) { r.buf = r.buf[:len(r.buf)+n] }

// Write adds a copy of p to the input.
func (r *Reader) Write(p []byte) (int, error) {
	r.reserve(len(p))
	r.buf = append(r.buf, p...)
	return len(p), nil
}

// reserve makes room for n more bytes: it moves what has not been returned yet to the front
// when that is worth it (which costs at most what was consumed since the last time: linear
// overall), and grows the buffer at least twofold when it must.
func (r *Reader) reserve(n int) {
	r.own()
	if r.start > 0 && (r.start >= len(r.buf)/2 || cap(r.buf)-len(r.buf) < n) {
		kept := copy(r.buf, r.buf[r.start:])
		r.buf, r.pos, r.start = r.buf[:kept], r.pos-r.start, 0
	}
	if cap(r.buf)-len(r.buf) < n {
		size := max(2*cap(r.buf), len(r.buf)+n)
		if r.left > 0 && r.bulkLen >= 0 {
			// A long bulk string on its way: grow fourfold, up to its end, so that it is
			// copied a third of its length in all rather than once over; never past four
			// times what has come, so that what a client declares costs nothing until sent.
			end := r.pos + int(r.bulkLen) + 2
			size = max(size, min(end, 4*len(r.buf)))
		}
		grown := make([]byte, len(r.buf), size)
		copy(grown, r.buf)
		r.buf = grown
	}
}

// Lend gives the Reader p to read from, without copying: for a caller that reads every
// client into one buffer. Call it only when nothing is Buffered, and call Return before p is
// used again.
func (r *Reader) Lend(p []byte) {
	r.buf, r.start, r.pos, r.lent = p, 0, 0, true
}

// Return keeps a copy of what is left of a lent buffer (nothing, usually), and lets go of it.
func (r *Reader) Return() { r.own() }

// own copies a lent buffer's rest into one of the Reader's own, sized to it.
func (r *Reader) own() {
	if !r.lent {
		return
	}
	r.lent = false
	rest := r.buf[r.start:]
	r.buf, r.pos, r.last = nil, r.pos-r.start, r.last-r.start
	r.start = 0
	if len(rest) > 0 {
		r.buf = append(make([]byte, 0, 2*len(rest)), rest...)
	}
}

// Buffered is how many bytes have been given and not yet returned as a Command.
func (r *Reader) Buffered() int { return len(r.buf) - r.start }

// HasInput reports whether Next has something to say without more input: bytes not yet
// returned, or the protocol error it stopped at (whose line may be consumed already).
func (r *Reader) HasInput() bool { return r.err != nil || r.start < len(r.buf) }

// Pending returns the bytes given and not yet returned as a Command (valid until the next
// call to Buffer).
func (r *Reader) Pending() []byte { return r.buf[r.start:] }

// Held is the storage the Reader holds of its own (a lent buffer is not its own).
func (r *Reader) Held() int {
	if r.lent {
		return 0
	}
	return cap(r.buf)
}

// Cap is the capacity of the buffer the Reader holds (a caller's own, while lent).
func (r *Reader) Cap() int { return cap(r.buf) }

// Release lets go of a large buffer once nothing is pending.
func (r *Reader) Release() {
	if !r.lent && r.start == len(r.buf) && cap(r.buf) > 4*readSize {
		r.buf, r.start, r.pos, r.last = nil, 0, 0, 0
		clear(r.args) // the last command's arguments point into the buffer, and would keep it
		r.args = r.args[:0]
	}
}

// Take hands over the buffer that holds the command Next returned last, when that command is
// all the buffer holds and the buffer is the Reader's own (a big command, read in many
// pieces): its Raw, which the caller may then keep, and the Reader starts afresh. Otherwise
// it returns nil.
func (r *Reader) Take() []byte {
	if r.lent || r.last != 0 || r.start != len(r.buf) || r.start == 0 {
		return nil
	}
	raw := r.buf[:r.start:r.start]
	r.buf, r.start, r.pos = nil, 0, 0
	return raw
}

// Unread gives back the command that Next returned last, to be returned again.
func (r *Reader) Unread() { r.start, r.pos = r.last, r.last }

// Next returns the next complete command, or ok false when more input is needed. An empty
// request (an empty line, or an array of zero or fewer elements) is skipped, as Redis skips
// it. unauthenticated applies Redis 7's bounds for a client that has to log in and has not.
// After a *ProtocolError the Reader returns it again on every call.
func (r *Reader) Next(unauthenticated bool) (cmd Command, ok bool, err error) {
	for r.err == nil {
		if r.start == len(r.buf) {
			return Command{}, false, nil
		}
		var done bool
		if r.left == 0 && r.buf[r.start] != '*' {
			cmd, done = r.inline()
		} else {
			cmd, done = r.multibulk(unauthenticated)
		}
		if r.err != nil || !done {
			break
		}
		if len(cmd.Args) > 0 {
			return cmd, true, nil
		}
	}
	return Command{}, false, r.err
}

// fail stops the reader at a protocol error.
func (r *Reader) fail(err error) (Command, bool) {
	r.err = err
	return Command{}, false
}

// line finds the end of the header line that starts at from: the index of its '\r', which
// must have one more byte after it (Redis does not check that it is '\n'). -1: not yet. As
// in Redis, which looks for it with strchr, a NUL byte before it hides it.
func (r *Reader) line(from int) int {
	i := indexEither(r.buf[from:], '\r')
	if i < 0 || r.buf[from+i] == 0 || from+i+1 >= len(r.buf) {
		return -1
	}
	return from + i
}

// indexEither is the index of the first c or NUL byte in b, or -1.
func indexEither(b []byte, c byte) int {
	i := bytes.IndexByte(b, c)
	if i < 0 {
		i = len(b)
	}
	if z := bytes.IndexByte(b[:i], 0); z >= 0 {
		return z
	}
	if i == len(b) {
		return -1
	}
	return i
}

func (r *Reader) multibulk(unauthenticated bool) (Command, bool) {
	if r.left == 0 {
		nl := r.line(r.start)
		if nl < 0 {
			if len(r.buf)-r.start > InlineMax {
				return r.fail(errMbulkCount)
			}
			return Command{}, false
		}
		n, ok := parseInt(r.buf[r.start+1 : nl])
		switch {
		case !ok || n > MaxMultibulk:
			return r.fail(errMultibulk)
		case n > UnauthMultibulk && unauthenticated:
			return r.fail(errUnauthMbulk)
		}
		r.pos = nl + 2
		if n <= 0 {
			r.start = r.pos
			return Command{}, true
		}
		r.left, r.bulkLen, r.spans = n, -1, r.spans[:0]
	}
	for r.left > 0 {
		if r.bulkLen < 0 {
			if wait, err := r.bulkHeader(unauthenticated); err != nil {
				return r.fail(err)
			} else if wait {
				return Command{}, false
			}
		}
		if int64(len(r.buf)-r.pos) < r.bulkLen+2 {
			return Command{}, false
		}
		end := r.pos + int(r.bulkLen)
		r.spans = append(r.spans, r.pos-r.start, end-r.start)
		r.pos, r.bulkLen = end+2, -1
		r.left--
	}
	raw := r.buf[r.start:r.pos:r.pos]
	r.last = r.start
	r.args = r.args[:0]
	for i := 0; i < len(r.spans); i += 2 {
		r.args = append(r.args, raw[r.spans[i]:r.spans[i+1]:r.spans[i+1]])
	}
	r.start = r.pos
	return Command{Args: r.args, Raw: raw}, true
}

// bulkHeader reads the next argument's $<length> line; wait while it has not all come.
func (r *Reader) bulkHeader(unauthenticated bool) (wait bool, err error) {
	nl := r.line(r.pos)
	if nl < 0 {
		if len(r.buf)-r.pos > InlineMax {
			return false, errBulkCount
		}
		return true, nil
	}
	if r.buf[r.pos] != '$' {
		return false, &ProtocolError{"expected '$', got '" + string(r.buf[r.pos]) + "'"}
	}
	n, ok := parseInt(r.buf[r.pos+1 : nl])
	switch {
	case !ok || n < 0 || n > r.maxBulk:
		return false, errBulkLength
	case n > UnauthBulk && unauthenticated:
		return false, errUnauthBulk
	}
	r.bulkLen, r.pos = n, nl+2
	return false, nil
}

func (r *Reader) inline() (Command, bool) {
	i := indexEither(r.buf[r.start:], '\n')
	if i < 0 || r.buf[r.start+i] == 0 { // a NUL byte hides the end of the line, as in Redis
		if len(r.buf)-r.start > InlineMax {
			return r.fail(errInline)
		}
		return Command{}, false
	}
	line := r.buf[r.start : r.start+i]
	r.last = r.start
	r.start += i + 1
	r.pos = r.start
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	args, scratch, ok := splitArgs(r.args[:0], r.scratch[:0], line)
	if !ok {
		return r.fail(errUnbalanced)
	}
	r.args, r.scratch = args, scratch
	return Command{Args: args, Inline: true}, true
}

// parseInt is Redis's string2ll: an optional '-', then digits with no leading zero (or "0"
// alone), within int64.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	switch {
	case neg && n <= 1<<63:
		return -int64(n-1) - 1, true
	case !neg && n <= math.MaxInt64:
		return int64(n), true
	}
	return 0, false
}

// AppendLower appends name in ASCII lower case to dst: a command's name, for a table lookup
// with a buffer on the stack, without allocating.
func AppendLower(dst, name []byte) []byte {
	for _, ch := range name {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		dst = append(dst, ch)
	}
	return dst
}
