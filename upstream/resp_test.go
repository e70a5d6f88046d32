package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadReply(t *testing.T) {
	tests := []string{
		"+OK\r\n", "-ERR x\r\n", ":42\r\n", "$3\r\nbar\r\n", "$0\r\n\r\n", "$-1\r\n", "*-1\r\n", "*0\r\n",
		"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
	}
	for _, in := range tests {
		got, err := readReply(bufio.NewReader(strings.NewReader(in + "+next\r\n")))
		if err != nil || string(got) != in {
			t.Errorf("readReply(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"?x\r\n", "$3\r\nab\r\n", "$x\r\n", "*x\r\n", "+OK\n", "$-2\r\n", strings.Repeat("*1\r\n", 100) + ":1\r\n"} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("readReply(%q) accepted it", bad)
		}
	}
}

func TestSlot(t *testing.T) {
	// Values from CLUSTER KEYSLOT.
	tests := map[string]uint16{"foo": 12182, "bar": 5061, "{user1000}.following": 3443, "{user1000}.followers": 3443,
		"foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061, "": 0}
	for key, want := range tests {
		if got := Slot([]byte(key)); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestSplitArray(t *testing.T) {
	els, err := splitArray([]byte("*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:1\r\n"))
	if err != nil || len(els) != 3 || string(els[1]) != "$-1\r\n" || string(els[2]) != "*1\r\n:1\r\n" {
		t.Fatalf("splitArray = %q, %v", els, err)
	}
	if string(arrayReply(els)) != "*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:1\r\n" {
		t.Fatal("arrayReply does not rebuild the array")
	}
}

// FuzzReadReply: never panics; what it accepts is a prefix of the input and reads back the
// same.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "$3\r\nbar\r\n", "*2\r\n$1\r\na\r\n*-1\r\n", "$99999999999\r\n", "*3\r\n:1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := readReply(bufio.NewReaderSize(bytes.NewReader(in), 16))
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("readReply(%q): unexpected error %v", in, err)
			}
			return
		}
		if !bytes.HasPrefix(in, got) {
			t.Fatalf("reply %q is not a prefix of %q", got, in)
		}
		again, err := readReply(bufio.NewReader(bytes.NewReader(got)))
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("re-read %q: %q, %v", got, again, err)
		}
	})
}
