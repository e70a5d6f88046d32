package resp

import (
	"bufio"
	"errors"
	"io"
	"strconv"
)

// The one reading of Redis's replies: ReplyScanner finds where a reply ends; AppendReply reads
// whole replies from a connection with it; SplitArray, ParseInt and Decode take a raw reply
// apart.

// AppendReply reads one whole reply (RESP2 or RESP3) from r, and appends its raw bytes to
// out, which it returns. It takes from r exactly the reply, and grows out as the bytes arrive,
// not as a length claims. A stream that is not RESP is ErrReply; one that ends inside a reply
// is io.ErrUnexpectedEOF.
func AppendReply(r *bufio.Reader, out []byte) ([]byte, error) {
	var s ReplyScanner
	return s.Append(r, out)
}

// preGrow is the most Append grows its buffer by at once for a length a reply announces.
const preGrow = 64 << 20

// Append is AppendReply with s, which a connection keeps from one reply to the next so that
// reading costs no allocation.
func (s *ReplyScanner) Append(r *bufio.Reader, out []byte) ([]byte, error) {
	start := len(out)
	for {
		if _, err := r.Peek(1); err != nil {
			if errors.Is(err, io.EOF) && len(out) > start {
				err = io.ErrUnexpectedEOF
			}
			s.reset()
			return out[:start], err
		}
		chunk, _ := r.Peek(r.Buffered())
		have := len(out) - start
		out = append(out, chunk...)
		n, err := s.Scan(out[start:])
		if err != nil {
			s.reset()
			return out[:start], err
		}
		if n > 0 {
			_, _ = r.Discard(n - have)
			return out[:start+n], nil
		}
		_, _ = r.Discard(len(chunk))
		// A bulk string whose length came: room for all of it at once, up to preGrow (what
		// a length claims beyond it is taken as it comes).
		if need := s.Need(); need > cap(out)-start && need-len(out)+start <= preGrow {
			grown := make([]byte, len(out), start+need)
			copy(grown, out)
			out = grown
		}
	}
}

// ReadReply reads one whole reply from r and returns its raw bytes.
func ReadReply(r *bufio.Reader) ([]byte, error) { return AppendReply(r, nil) }

// SplitArray returns the raw elements of a raw array reply (RESP2 * or RESP3 set, push),
// each sharing raw's memory.
func SplitArray(raw []byte) ([][]byte, error) {
	i := indexCRLF(raw)
	if i < 2 || (raw[0] != '*' && raw[0] != '~' && raw[0] != '>') {
		return nil, ErrReply
	}
	n, ok := parseInt(raw[1:i])
	if !ok || n < -1 {
		return nil, ErrReply
	}
	rest := raw[i+2:]
	out := make([][]byte, 0, min(max(n, 0), int64(len(rest)/3))) // an element takes 3 bytes at least
	var s ReplyScanner
	for range max(n, 0) {
		end, err := s.Scan(rest)
		if err != nil {
			return nil, err
		}
		if end == 0 {
			return nil, ErrReply
		}
		out = append(out, rest[:end:end])
		rest = rest[end:]
	}
	if len(rest) != 0 {
		return nil, ErrReply
	}
	return out, nil
}

// errNotInteger: ParseInt was given another reply than an integer.
var errNotInteger = errors.New("resp: not an integer reply")

// ParseInt reads a raw integer reply.
func ParseInt(raw []byte) (int64, error) {
	if len(raw) < 4 || raw[0] != ':' || raw[len(raw)-2] != '\r' || raw[len(raw)-1] != '\n' {
		return 0, errNotInteger
	}
	return strconv.ParseInt(string(raw[1:len(raw)-2]), 10, 64)
}

// ReplyError is an error reply from Redis, as go-redis gives it: it satisfies redis.Error,
// so that redis.HasErrorPrefix and go-redis's retry rules read it as Redis's.
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// RedisError marks ReplyError as Redis's (go-redis's redis.Error).
func (ReplyError) RedisError() {}

// Decode decodes one raw RESP2 reply as go-redis would: a simple or bulk string as a string,
// an integer as an int64, a null as nil, an array as []any (an error inside it as its
// ReplyError); an error reply is returned as the error (a ReplyError), with a nil value. It is
// for scripts' small replies.
func Decode(raw []byte) (any, error) {
	v, rest, err := decodeOne(raw)
	if err == nil && len(rest) != 0 {
		err = ErrReply
	}
	if re, ok := v.(ReplyError); ok {
		return nil, re
	}
	return v, err
}

func decodeOne(b []byte) (any, []byte, error) {
	i := indexCRLF(b)
	if i < 1 {
		return nil, nil, ErrReply
	}
	line, rest := b[1:i], b[i+2:]
	switch b[0] {
	case '+':
		return string(line), rest, nil
	case '-':
		return ReplyError(line), rest, nil
	case ':':
		n, err := strconv.ParseInt(string(line), 10, 64)
		if err != nil {
			return nil, nil, ErrReply
		}
		return n, rest, nil
	case '$':
		n, ok := parseInt(line)
		switch {
		case !ok || n < -1 || (n >= 0 && int64(len(rest)) < n+2):
			return nil, nil, ErrReply
		case n == -1:
			return nil, rest, nil
		case rest[n] != '\r' || rest[n+1] != '\n':
			return nil, nil, ErrReply
		}
		return string(rest[:n]), rest[n+2:], nil
	case '*':
		n, ok := parseInt(line)
		if !ok || n < -1 || n > int64(len(rest)) { // each element takes at least 3 bytes
			return nil, nil, ErrReply
		}
		if n == -1 {
			return nil, rest, nil
		}
		out := make([]any, n)
		for j := range out {
			var v any
			var err error
			if v, rest, err = decodeOne(rest); err != nil {
				return nil, nil, err
			}
			out[j] = v
		}
		return out, rest, nil
	}
	return nil, nil, ErrReply
}

// indexCRLF is where the first CRLF in b starts, or -1.
func indexCRLF(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return i
		}
	}
	return -1
}
