package router

import (
	"strconv"
	"strings"
)

// Writer is where replies go: a redcon.Conn, or anything with its methods.
type Writer interface {
	WriteString(s string)
	WriteBulkString(s string)
	WriteInt64(n int64)
	WriteError(msg string)
	WriteArray(n int)
	WriteNull()
	WriteRaw(b []byte)
}

// Reply is one RESP reply: one of the types below.
type Reply interface{ write(w Writer) }

// SimpleString is a +status reply.
type SimpleString string

// BulkString is a $bulk reply.
type BulkString string

// Int is an :integer reply.
type Int int64

// Array is a *array reply.
type Array []Reply

// NullBulk is the $-1 reply.
type NullBulk struct{}

// OK is +OK.
const OK = SimpleString("OK")

// Map is field/value pairs, flat: a map in RESP3, a flat array in RESP2.
type Map []Reply

// Verbatim is a verbatim string of text in RESP3 (INFO's reply), a bulk string in RESP2.
type Verbatim string

// resp3Writer is a Writer for a client that speaks RESP3.
type resp3Writer struct{ Writer }

func isRESP3(w Writer) bool {
	_, ok := w.(resp3Writer)
	return ok
}

// writerFor is w as s's protocol wants it.
func writerFor(w Writer, s *Session) Writer {
	if s.Proto == 3 {
		return resp3Writer{w}
	}
	return w
}

func (r SimpleString) write(w Writer) { w.WriteString(string(r)) }
func (r BulkString) write(w Writer)   { w.WriteBulkString(string(r)) }
func (r Int) write(w Writer)          { w.WriteInt64(int64(r)) }
func (NullBulk) write(w Writer) {
	if isRESP3(w) {
		w.WriteRaw([]byte("_\r\n"))
		return
	}
	w.WriteNull()
}
func (r Array) write(w Writer) {
	w.WriteArray(len(r))
	for _, e := range r {
		e.write(w)
	}
}
func (r Map) write(w Writer) {
	if !isRESP3(w) {
		Array(r).write(w)
		return
	}
	w.WriteRaw([]byte("%" + strconv.Itoa(len(r)/2) + "\r\n"))
	for _, e := range r {
		e.write(w)
	}
}
func (r Verbatim) write(w Writer) {
	if !isRESP3(w) {
		w.WriteBulkString(string(r))
		return
	}
	w.WriteRaw([]byte("=" + strconv.Itoa(len(r)+4) + "\r\ntxt:" + string(r) + "\r\n"))
}

// Fields builds field/value pairs, the shape every multi-value SECKILL reply takes: a map in
// RESP3, a flat array in RESP2.
func Fields(kv ...any) Map {
	out := make(Map, 0, len(kv))
	for _, v := range kv {
		switch v := v.(type) {
		case string:
			out = append(out, BulkString(v))
		case int64:
			out = append(out, Int(v))
		case int:
			out = append(out, Int(v))
		case float64: // as Redis gives a double over RESP2: a bulk string
			out = append(out, BulkString(strconv.FormatFloat(v, 'f', -1, 64)))
		case Reply:
			out = append(out, v)
		default:
			panic("router.Fields: unsupported value")
		}
	}
	return out
}

// WriteError writes err as a RESP error. An error whose text starts with an upper-case code
// word (SOLDOUT, DUPLICATE, NOAUTH, ...) is written as it is; any other gets "ERR " in front.
func WriteError(w Writer, err error) { w.WriteError(errorText(err)) }

// errorText is err as a one-line RESP error message, with a code ("ERR" when it has none).
func errorText(err error) string {
	msg := strings.ReplaceAll(strings.ReplaceAll(err.Error(), "\r", " "), "\n", " ")
	if !hasCode(msg) {
		msg = "ERR " + msg
	}
	return msg
}

func hasCode(msg string) bool {
	word, _, _ := strings.Cut(msg, " ")
	if word == "" {
		return false
	}
	for _, c := range word {
		if (c < 'A' || c > 'Z') && c != '_' {
			return false
		}
	}
	return true
}

// respError is an error whose text is exactly the RESP error to send.
type respError string

func (e respError) Error() string { return string(e) }
