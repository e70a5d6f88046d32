package resp

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// readAll feeds in to a Reader in pieces of size step (0: all at once) and returns every
// command, rendered as its arguments joined by '|', and the error it stopped at.
func readAll(in string, step int, maxBulk int64, unauth bool) ([]string, error) {
	r := NewReader(maxBulk)
	var out []string
	if step <= 0 {
		step = len(in) + 1
	}
	for off := 0; ; off += step {
		if off < len(in) {
			_, _ = r.Write([]byte(in[off:min(off+step, len(in))]))
		}
		for {
			cmd, ok, err := r.Next(unauth)
			if err != nil {
				return out, err
			}
			if !ok {
				break
			}
			out = append(out, string(bytes.Join(cmd.Args, []byte("|"))))
			if !cmd.Inline && !strings.HasPrefix(string(cmd.Raw), "*") {
				return out, fmt.Errorf("raw %q", cmd.Raw)
			}
		}
		if off >= len(in) {
			return out, nil
		}
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name, in string
		unauth   bool
		want     []string
		err      string
	}{
		{"one", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", false, []string{"GET|k"}, ""},
		{"pipeline", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", false, []string{"PING", "ECHO|"}, ""},
		{"binary", "*2\r\n$4\r\nECHO\r\n$4\r\na\r\nb\r\n", false, []string{"ECHO|a\r\nb"}, ""},
		{"empty arrays are skipped", "*0\r\n*-10\r\n*1\r\n$4\r\nPING\r\n", false, []string{"PING"}, ""},
		{"incomplete", "*2\r\n$3\r\nGET\r\n$1\r\n", false, nil, ""},
		{"inline", "PING\r\nSET k  v\n\r\n  \r\nGET k\r\n", false, []string{"PING", "SET|k|v", "GET|k"}, ""},
		{"inline quotes", `SET "a b" 'c\'d' "\x41\n\"" x"y z"` + "\r\n", false, []string{"SET|a b|c'd|A\n\"|xy z"}, ""},
		{"inline text after a quote", "ECHO x\"y\"z\r\n", false, nil, "unbalanced quotes in request"},
		{"a NUL hides the end of an inline line", "ECHO a\x00b c\r\n", false, nil, ""},
		{"a NUL hides the end of a header", "*1\x00\r\n$4\r\nPING\r\n", false, nil, ""},
		{"inline vertical tab in an argument", "ECHO a\vb\r\n", false, []string{"ECHO|a\vb"}, ""},
		{"unbalanced", "SET \"a\r\n", false, nil, "unbalanced quotes in request"},
		{"quote then text", "SET \"a\"b\r\n", false, nil, "unbalanced quotes in request"},
		{"bad multibulk", "*x\r\n", false, nil, "invalid multibulk length"},
		{"multibulk leading zero", "*01\r\n", false, nil, "invalid multibulk length"},
		{"multibulk above INT_MAX", "*2147483648\r\n", false, nil, "invalid multibulk length"},
		{"multibulk at INT_MAX waits", "*2147483647\r\n", false, nil, ""},
		{"expected $", "*1\r\n:1\r\n", false, nil, "expected '$', got ':'"},
		{"negative bulk", "*1\r\n$-1\r\n", false, nil, "invalid bulk length"},
		{"bulk above the bound", "*1\r\n$1048577\r\n", false, nil, "invalid bulk length"},
		{"bulk at the bound waits", "*1\r\n$1048576\r\n", false, nil, ""},
		{"unauthenticated multibulk", "*11\r\n", true, nil, "unauthenticated multibulk length"},
		{"unauthenticated multibulk of 10", "*10\r\n", true, nil, ""},
		{"unauthenticated bulk", "*1\r\n$16385\r\n", true, []string{}, "unauthenticated bulk length"},
		{"a bound read before the error", "*1\r\n$4\r\nPING\r\n*1\r\n$x\r\n", false, []string{"PING"}, "invalid bulk length"},
		{"long mbulk header", "*" + strings.Repeat("1", InlineMax+1), false, nil, "too big mbulk count string"},
		{"long bulk header", "*1\r\n$" + strings.Repeat("1", InlineMax+1), false, nil, "too big bulk count string"},
		{"long inline", strings.Repeat("a", InlineMax+1), false, nil, "too big inline request"},
		{"inline at the bound waits", strings.Repeat("a", InlineMax), false, nil, ""},
	}
	for _, tt := range tests {
		for _, step := range []int{0, 1, 2, 7} {
			t.Run(fmt.Sprintf("%s/%d", tt.name, step), func(t *testing.T) {
				if step == 1 && len(tt.in) > 1000 {
					t.Skip("long")
				}
				got, err := readAll(tt.in, step, 1<<20, tt.unauth)
				var pe *ProtocolError
				switch {
				case tt.err == "" && err != nil:
					t.Fatalf("error %v", err)
				case tt.err != "" && (!errors.As(err, &pe) || pe.Msg != tt.err):
					t.Fatalf("error %v, want Protocol error: %s", err, tt.err)
				}
				if strings.Join(got, ",") != strings.Join(tt.want, ",") {
					t.Fatalf("commands %q, want %q", got, tt.want)
				}
			})
		}
	}
}

// TestReaderBufferFollowsWhatIsSent: a client that declares a long bulk string and sends
// little costs what it sent, not what it declared; one that sends it all in pieces costs
// linear copying (the buffer at most doubles as it grows).
func TestReaderBufferFollowsWhatIsSent(t *testing.T) {
	r := NewReader(1 << 30)
	_, _ = r.Write([]byte("*2\r\n$3\r\nSET\r\n$1000000000\r\nabc"))
	if _, ok, err := r.Next(false); ok || err != nil {
		t.Fatalf("Next: %v, %v", ok, err)
	}
	if c := cap(r.buf); c > 1<<20 {
		t.Fatalf("buffer of %d bytes for 30 sent", c)
	}
	const size = 8 << 20
	r = NewReader(size)
	_, _ = r.Write([]byte(fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n", size)))
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	grows := 0
	for sent := 0; sent < size; sent += len(chunk) {
		before := cap(r.buf)
		_, _ = r.Write(chunk)
		if cap(r.buf) != before {
			grows++
		}
		if _, ok, _ := r.Next(false); ok {
			t.Fatal("complete before its last byte")
		}
	}
	_, _ = r.Write([]byte("\r\n"))
	cmd, ok, err := r.Next(false)
	if !ok || err != nil || len(cmd.Args) != 2 || len(cmd.Args[1]) != size {
		t.Fatalf("the 8 MiB command: %v %v %d", ok, err, len(cmd.Args))
	}
	if grows > 10 || cap(r.buf) > 4*size {
		t.Fatalf("grew %d times to %d bytes", grows, cap(r.buf))
	}
}

// TestReaderPendingAcrossCompaction: what is not yet a command survives the buffer moving.
func TestReaderPendingAcrossCompaction(t *testing.T) {
	r := NewReader(1 << 20)
	one := "*2\r\n$4\r\nECHO\r\n$100\r\n" + strings.Repeat("y", 100) + "\r\n"
	for range 2000 {
		_, _ = r.Write([]byte(one))
		cmd, ok, err := r.Next(false)
		if !ok || err != nil || string(cmd.Raw) != one {
			t.Fatalf("Next: %v %v %q", ok, err, cmd.Raw)
		}
	}
	_, _ = r.Write([]byte(one[:30]))
	r.Buffer(1 << 20)
	if string(r.Pending()) != one[:30] {
		t.Fatalf("pending %q", r.Pending())
	}
	_, _ = r.Write([]byte(one[30:]))
	if cmd, ok, _ := r.Next(false); !ok || string(cmd.Args[1]) != strings.Repeat("y", 100) {
		t.Fatal("the command split across a compaction is lost")
	}
}

// FuzzReader: whatever the input and however it is split, the Reader returns the same
// commands and error as when it is given all at once, and never holds more than it was given.
func FuzzReader(f *testing.F) {
	for _, s := range []string{"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", "PING\r\n", "SET \"a b\" 'c'\r\n", "*-1\r\n", "*1\r\n$-5\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$2\r\nbc\r\n*0\r\n", "\"\\x4\"\r\n", "*1\r\n$4\r\nPING\r\n\r\n"} {
		f.Add(s, 3, false)
	}
	f.Fuzz(func(t *testing.T, in string, step int, unauth bool) {
		want, werr := readAll(in, 0, 1<<10, unauth)
		got, gerr := readAll(in, max(step%64, 1), 1<<10, unauth)
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("in pieces of %d: %q, %v; whole: %q, %v", step, got, gerr, want, werr)
		}
	})
}

// TestReaderLendAndUnread: a lent buffer is read without a copy, what is left of it is kept
// when it is returned, and a command given back with Unread comes again.
func TestReaderLendAndUnread(t *testing.T) {
	r := NewReader(1 << 20)
	shared := []byte("*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$5\r\nhel")
	r.Lend(shared)
	cmd, ok, err := r.Next(false)
	if !ok || err != nil || string(cmd.Args[0]) != "PING" || &cmd.Raw[0] != &shared[0] {
		t.Fatalf("first command: %v %v %q (copied: %v)", ok, err, cmd.Args, &cmd.Raw[0] != &shared[0])
	}
	r.Unread()
	if cmd, ok, _ = r.Next(false); !ok || string(cmd.Args[0]) != "PING" {
		t.Fatal("Unread did not give the command back")
	}
	if _, ok, _ = r.Next(false); ok {
		t.Fatal("the incomplete ECHO came out")
	}
	r.Return()
	copy(shared, "garbage garbage garbage garbage garbage garbage")
	_, _ = r.Write([]byte("lo\r\n"))
	if cmd, ok, _ = r.Next(false); !ok || string(cmd.Args[1]) != "hello" {
		t.Fatalf("the ECHO across Return: %v %q", ok, cmd.Args)
	}
	if r.Buffered() != 0 {
		t.Fatalf("%d bytes left", r.Buffered())
	}
}
