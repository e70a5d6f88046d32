package resp

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// replyStream is a mix of replies as pass-through reads them: small values, a 1 KB bulk, an
// array of ten, a nested MGET-like array.
var replyStream = []byte("+OK\r\n:12345\r\n$5\r\nhello\r\n$1024\r\n" + strings.Repeat("x", 1024) + "\r\n" +
	"*10\r\n" + strings.Repeat("$3\r\nabc\r\n", 10) + "*2\r\n*2\r\n:1\r\n$-1\r\n$2\r\nok\r\n")

// BenchmarkAppendReply reads replyStream's six replies into one buffer with one scanner, as a
// connection's round trip does.
func BenchmarkAppendReply(b *testing.B) {
	src := bytes.NewReader(replyStream)
	r := bufio.NewReader(src)
	var out []byte
	var s ReplyScanner
	b.SetBytes(int64(len(replyStream)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(replyStream)
		r.Reset(src)
		out = out[:0]
		for range 6 {
			var err error
			if out, err = s.Append(r, out); err != nil {
				b.Fatal(err)
			}
		}
	}
}
