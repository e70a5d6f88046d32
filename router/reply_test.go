package router

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tidwall/redcon"
)

// appendError, which buys' replies use with no writer, writes what WriteError writes.
func TestAppendErrorIsWriteError(t *testing.T) {
	for _, err := range []error{
		errors.New("SOLDOUT sku_1 sold out"),
		errors.New("no code here"),
		errors.New("DUPLICATE line\r\nbreak"),
		errors.New(""),
	} {
		w := redcon.NewWriter(nil)
		WriteError(w, err)
		got := appendError([]byte("+prefix\r\n"), err)
		want := append([]byte("+prefix\r\n"), w.Buffer()...)
		if !bytes.Equal(got, want) {
			t.Errorf("%q: appendError wrote %q, WriteError %q", err, got, want)
		}
	}
	if got := string(appendError(nil, errors.New("no code"))); got != "-ERR no code\r\n" {
		t.Errorf("an error without a code: %q", got)
	}
}

// The sold-out answer of a buy costs no allocation.
func TestAppendErrorAllocations(t *testing.T) {
	err := errors.New("SOLDOUT sku_1")
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = appendError(buf[:0], err) }); n != 0 {
		t.Errorf("appendError allocates %.0f times", n)
	}
}

// BenchmarkAppendErrorSoldOut is the reply to a sold-out buy without compat replies.
func BenchmarkAppendErrorSoldOut(b *testing.B) {
	err := errors.New("SOLDOUT sku_1")
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = appendError(buf[:0], err)
	}
}
