package resp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestReadReply(t *testing.T) {
	deep := strings.Repeat("*1\r\n", 100) + ":1\r\n" // Redis returns such replies: no depth bound
	big := "$70000\r\n" + strings.Repeat("x", 70000) + "\r\n"
	for _, in := range []string{
		"+OK\r\n", "-ERR x\r\n", ":42\r\n", "$3\r\nbar\r\n", "$0\r\n\r\n", "$-1\r\n", "*-1\r\n", "*0\r\n",
		"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", "%1\r\n+k\r\n:1\r\n", "|1\r\n+a\r\n+b\r\n:1\r\n", ">2\r\n+m\r\n:1\r\n", deep, big,
	} {
		r := bufio.NewReaderSize(strings.NewReader(in+"+next\r\n"), 16)
		got, err := ReadReply(r)
		if err != nil || string(got) != in {
			t.Errorf("ReadReply(%.40q) = %.40q, %v", in, got, err)
			continue
		}
		if next, err := ReadReply(r); err != nil || string(next) != "+next\r\n" {
			t.Errorf("after %.40q: %q, %v; the reader took more than the reply", in, next, err)
		}
	}
	for _, bad := range []string{"?x\r\n", "$x\r\n", "*x\r\n", "+OK\n", "$-2\r\n", "$3\r\nabcd\r\n"} {
		if _, err := ReadReply(bufio.NewReader(strings.NewReader(bad))); !errors.Is(err, ErrReply) {
			t.Errorf("ReadReply(%q): %v, want ErrReply", bad, err)
		}
	}
	if _, err := ReadReply(bufio.NewReader(strings.NewReader("$3\r\nab"))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a reply cut short: %v, want io.ErrUnexpectedEOF", err)
	}
	out, err := AppendReply(bufio.NewReader(strings.NewReader(":2\r\n")), []byte(":1\r\n"))
	if err != nil || string(out) != ":1\r\n:2\r\n" {
		t.Errorf("AppendReply = %q, %v", out, err)
	}
}

func TestSplitArray(t *testing.T) {
	els, err := SplitArray([]byte("*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:1\r\n"))
	if err != nil || len(els) != 3 || string(els[0]) != "$1\r\na\r\n" || string(els[1]) != "$-1\r\n" || string(els[2]) != "*1\r\n:1\r\n" {
		t.Fatalf("SplitArray = %q, %v", els, err)
	}
	for _, bad := range []string{"+OK\r\n", "*2\r\n:1\r\n", "*1\r\n:1\r\n:2\r\n", "*x\r\n"} {
		if _, err := SplitArray([]byte(bad)); err == nil {
			t.Errorf("SplitArray(%q) accepted it", bad)
		}
	}
	if n, err := ParseInt([]byte(":-7\r\n")); err != nil || n != -7 {
		t.Errorf("ParseInt = %d, %v", n, err)
	}
	if _, err := ParseInt([]byte("+7\r\n")); err == nil {
		t.Error("ParseInt of a simple string")
	}
}

func TestDecode(t *testing.T) {
	for in, want := range map[string]any{
		"+OK\r\n": "OK", ":5\r\n": int64(5), "$3\r\nabc\r\n": "abc", "$-1\r\n": nil, "*-1\r\n": nil,
		"*3\r\n:1\r\n$1\r\nx\r\n-ERR in\r\n": []any{int64(1), "x", ReplyError("ERR in")},
	} {
		got, err := Decode([]byte(in))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Decode(%q) = %#v, %v; want %#v", in, got, err, want)
		}
	}
	if v, err := Decode([]byte("-DUPLICATE x\r\n")); v != nil || err != ReplyError("DUPLICATE x") {
		t.Errorf("an error reply: %v, %v", v, err)
	}
	for _, bad := range []string{"", "+OK", ":x\r\n", "$3\r\nab\r\n", "$2\r\nabcd", "*2\r\n:1\r\n", "*99999999\r\n", ":1\r\n:2\r\n"} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrReply) {
			t.Errorf("Decode(%q): %v, want ErrReply", bad, err)
		}
	}
}

// FuzzReadReply: never panics; what it accepts is a prefix of the input that reads back the
// same, that the scanner finds whole, and that SplitArray and Decode take without panicking.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "$3\r\nbar\r\n", "*2\r\n$1\r\na\r\n*-1\r\n", "$99999999999\r\n", "*3\r\n:1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := ReadReply(bufio.NewReaderSize(bytes.NewReader(in), 16))
		if err != nil {
			if !errors.Is(err, ErrReply) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("ReadReply(%q): unexpected error %v", in, err)
			}
			return
		}
		if !bytes.HasPrefix(in, got) {
			t.Fatalf("reply %q is not a prefix of %q", got, in)
		}
		again, err := ReadReply(bufio.NewReader(bytes.NewReader(got)))
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("re-read %q: %q, %v", got, again, err)
		}
		var s ReplyScanner
		if n, err := s.Scan(got); err != nil || n != len(got) {
			t.Fatalf("the scanner finds %d of %q, %v", n, got, err)
		}
		_, _ = SplitArray(got)
		_, _ = Decode(got)
	})
}
