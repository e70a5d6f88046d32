package guard

import (
	"bytes"
	"errors"
	"strconv"
)

// errReply: a reply from Redis that is not RESP.
var errReply = errors.New("malformed reply from redis")

// decodeReply decodes one raw RESP2 reply as go-redis would: a simple or bulk string as a
// string, an integer as an int64, a null as nil, an array as []any; an error reply is the
// error (a replyError), with a nil value. It is for the buy script's small replies.
func decodeReply(raw []byte) (any, error) {
	v, rest, err := decodeOne(raw)
	if err == nil && len(rest) != 0 {
		err = errReply
	}
	if re, ok := v.(replyError); ok {
		return nil, re
	}
	return v, err
}

func decodeOne(b []byte) (any, []byte, error) {
	i := bytes.Index(b, []byte("\r\n"))
	if i < 1 {
		return nil, nil, errReply
	}
	line, rest := b[1:i], b[i+2:]
	switch b[0] {
	case '+':
		return string(line), rest, nil
	case '-':
		return replyError(line), rest, nil
	case ':':
		n, err := strconv.ParseInt(string(line), 10, 64)
		return n, rest, err
	case '$':
		n, err := strconv.Atoi(string(line))
		switch {
		case err != nil || n < -1 || (n >= 0 && len(rest) < n+2):
			return nil, nil, errReply
		case n == -1:
			return nil, rest, nil
		}
		return string(rest[:n]), rest[n+2:], nil
	case '*':
		n, err := strconv.Atoi(string(line))
		if err != nil || n < -1 {
			return nil, nil, errReply
		}
		if n == -1 {
			return nil, rest, nil
		}
		out := make([]any, n)
		for j := range out {
			var v any
			if v, rest, err = decodeOne(rest); err != nil {
				return nil, nil, err
			}
			if re, ok := v.(replyError); ok {
				v = error(re)
			}
			out[j] = v
		}
		return out, rest, nil
	}
	return nil, nil, errReply
}
