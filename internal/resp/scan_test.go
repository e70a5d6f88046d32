package resp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/redcon"
)

// scanAll feeds in to a ReplyScanner in pieces of size step, as a connection's buffer grows,
// and returns the replies found and the error it stopped at.
func scanAll(in string, step int) ([]string, error) {
	var s ReplyScanner
	var out []string
	buf := ""
	for off := 0; off < len(in) || buf != ""; off += step {
		if off < len(in) {
			buf += in[off:min(off+step, len(in))]
		}
		for {
			n, err := s.Scan([]byte(buf))
			if err != nil {
				return out, err
			}
			if n == 0 {
				break
			}
			out, buf = append(out, buf[:n]), buf[n:]
		}
		if off >= len(in) {
			return out, nil
		}
	}
	return out, nil
}

func TestReplyScanner(t *testing.T) {
	replies := []string{"+OK\r\n", "-ERR x\r\n", ":12\r\n", "$5\r\nhe\r\no\r\n", "$-1\r\n", "*-1\r\n", "*0\r\n",
		"*3\r\n:1\r\n*2\r\n$1\r\na\r\n*0\r\n+x\r\n", "%2\r\n+a\r\n:1\r\n+b\r\n*1\r\n_\r\n", "~2\r\n,1.5\r\n#t\r\n",
		">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n", "|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n", "=7\r\ntxt:abc\r\n", "(123\r\n", "!3\r\nerr\r\n"}
	in := strings.Join(replies, "")
	for _, step := range []int{len(in), 1, 2, 5, 13} {
		got, err := scanAll(in, step)
		if err != nil || strings.Join(got, "|") != strings.Join(replies, "|") {
			t.Fatalf("step %d: %q, %v", step, got, err)
		}
	}
	for _, bad := range []string{"?1\r\n", ":1\n", "$x\r\n", "*-2\r\n", "\r\n"} {
		if _, err := scanAll(bad, 1); err == nil {
			t.Errorf("%q scanned", bad)
		}
	}
}

// TestReplyScannerIsLinear: a million-element array arriving in 64 KiB pieces is scanned once:
// every header is looked at a bounded number of times.
func TestReplyScannerIsLinear(t *testing.T) {
	const n = 1 << 20
	in := fmt.Sprintf("*%d\r\n", n) + strings.Repeat("$1\r\nx\r\n", n)
	var s ReplyScanner
	var got int
	calls := 0
	for end := 64 << 10; got == 0; end += 64 << 10 {
		calls++
		var err error
		if got, err = s.Scan([]byte(in[:min(end, len(in))])); err != nil {
			t.Fatal(err)
		}
		if s.pos > min(end, len(in)) {
			t.Fatal("scanned past the data")
		}
	}
	if got != len(in) {
		t.Fatalf("length %d, want %d", got, len(in))
	}
}

// FuzzReplyScanner: on any bytes, whatever the pieces, the scanner finds the same replies as
// when it is given all at once, and a complete RESP2 reply is as long as redcon says.
func FuzzReplyScanner(f *testing.F) {
	for _, s := range []string{"+OK\r\n:1\r\n", "*2\r\n$1\r\na\r\n*1\r\n:1\r\n", "%1\r\n+a\r\n_\r\n", "|1\r\n+a\r\n+b\r\n:1\r\n", "$3\r\nabc\r\n"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, in string, step int) {
		whole, werr := scanAll(in, len(in)+1)
		parts, perr := scanAll(in, max(step%32, 1))
		if strings.Join(whole, "\x00") != strings.Join(parts, "\x00") || (werr == nil) != (perr == nil) {
			t.Fatalf("whole %q %v; in pieces of %d %q %v", whole, werr, step, parts, perr)
		}
		for _, r := range whole {
			if strings.ContainsAny(r[:1], "+-:$*") {
				if n, v := redcon.ReadNextRESP([]byte(r)); n != len(r) && v.Type != 0 {
					t.Fatalf("%q: redcon says %d bytes", r, n)
				}
			}
		}
	})
}
