// Package upstream passes commands through to the Redis Cluster and returns Redis's replies
// as raw RESP, byte for byte, so that a client sees exactly what Redis said: simple versus
// bulk strings, null bulk versus empty or null array, nested arrays, error text.
//
// It routes by key slot, splits the multi-key commands that Redis Cluster allows to be split,
// follows MOVED and ASK, runs blocking commands on connections of their own, and refuses what
// a shared proxy must not run. It does not serve SECKILL commands (router and guard do).
package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// ErrProtocol is a malformed reply from upstream.
var ErrProtocol = errors.New("upstream: malformed RESP reply")

// maxDepth bounds the nesting of a reply, and maxBulk the length of one bulk string (Redis's
// own proto-max-bulk-len).
const (
	maxDepth = 64
	maxBulk  = 512 << 20
)

// readReply reads one whole RESP2 or RESP3 reply from r and returns its raw bytes.
func readReply(r *bufio.Reader) ([]byte, error) {
	var out []byte
	if err := appendReply(r, &out, 0); err != nil {
		return nil, err
	}
	return out, nil
}

func readLine(r *bufio.Reader, out *[]byte) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line too long", ErrProtocol)
		}
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: %q", ErrProtocol, line)
	}
	*out = append(*out, line...)
	return line[1 : len(line)-2], nil
}

func appendReply(r *bufio.Reader, out *[]byte, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrProtocol, maxDepth)
	}
	kind, err := r.Peek(1)
	if err != nil {
		return err
	}
	t := kind[0]
	body, err := readLine(r, out)
	if err != nil {
		return err
	}
	switch t {
	case '+', '-', ':', '_', ',', '#', '(':
		return nil
	case '$', '!', '=':
		n, err := strconv.Atoi(string(body))
		if err != nil || n < -1 {
			return fmt.Errorf("%w: bulk length %q", ErrProtocol, body)
		}
		if n == -1 {
			return nil
		}
		if n > maxBulk {
			return fmt.Errorf("%w: bulk of %d bytes", ErrProtocol, n)
		}
		// Grow as the bytes arrive, not as the length claims.
		for left := n + 2; left > 0; {
			chunk := min(left, 64<<10)
			start := len(*out)
			*out = slices.Grow(*out, chunk)[:start+chunk]
			if _, err := io.ReadFull(r, (*out)[start:]); err != nil {
				return err
			}
			left -= chunk
		}
		if (*out)[len(*out)-2] != '\r' || (*out)[len(*out)-1] != '\n' {
			return fmt.Errorf("%w: bulk not ended by CRLF", ErrProtocol)
		}
		return nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(string(body))
		if err != nil || n < -1 {
			return fmt.Errorf("%w: aggregate length %q", ErrProtocol, body)
		}
		switch t {
		case '%':
			n *= 2 // a map's keys and values
		case '|':
			n = 2*n + 1 // an attribute's pairs, then the reply it is about
		}
		for range max(n, 0) {
			if err := appendReply(r, out, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: type %q", ErrProtocol, t)
}

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(b []byte, args [][]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// errorReply renders msg as a RESP error.
func errorReply(msg string) []byte { return []byte("-" + msg + "\r\n") }

// ReadReply reads one whole RESP2 or RESP3 reply from r and returns its raw bytes; a test client uses
// it to compare replies byte for byte.
func ReadReply(r *bufio.Reader) ([]byte, error) { return readReply(r) }
