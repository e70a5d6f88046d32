package proxy_test

import (
	"strings"
	"testing"
	"time"
)

// TestClientPause: CLIENT PAUSE holds this proxy's clients as Redis holds its own. WRITE:
// writes and buys wait (and what a client pipelined after them, in order), reads run;
// CLIENT UNPAUSE lets them go. ALL: every command waits, until the pause's time is over.
func TestClientPause(t *testing.T) {
	s := start(t, nil)
	k := "{" + newSKU("pause") + "}"
	admin, writer, reader, buyer := dialRaw(t, s.addr), dialRaw(t, s.addr), dialRaw(t, s.addr), dialRaw(t, s.addr)
	if got := admin.do(t, "SET", k+"r", "before"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	if got := admin.do(t, "CLIENT", "PAUSE", "100000", "WRITE"); got != "+OK\r\n" {
		t.Fatalf("CLIENT PAUSE 100000 WRITE: %q", got)
	}
	writer.send(t, "SET", k+"w", "v")
	writer.send(t, "GET", k+"w")
	buyer.send(t, "SECKILL.BUY", newSKU("nosale"), "u1")
	if got := reader.do(t, "GET", k+"r"); got != "$6\r\nbefore\r\n" {
		t.Errorf("a read while writes are paused: %q", got)
	}
	writer.silentFor(t, "SET while writes are paused", 300*time.Millisecond)
	buyer.silentFor(t, "SECKILL.BUY while writes are paused", 50*time.Millisecond)
	if got := admin.do(t, "CLIENT", "UNPAUSE"); got != "+OK\r\n" {
		t.Fatalf("CLIENT UNPAUSE: %q", got)
	}
	if got := writer.reply(t); got != "+OK\r\n" {
		t.Errorf("SET after UNPAUSE: %q", got)
	}
	if got := writer.reply(t); got != "$1\r\nv\r\n" {
		t.Errorf("the GET pipelined after it: %q", got)
	}
	if got := buyer.reply(t); !strings.HasPrefix(got, "-CLOSED") {
		t.Errorf("SECKILL.BUY of no sale after UNPAUSE: %q", got)
	}

	begun := time.Now()
	if got := admin.do(t, "CLIENT", "PAUSE", "400", "ALL"); got != "+OK\r\n" {
		t.Fatalf("CLIENT PAUSE 400 ALL: %q", got)
	}
	reader.send(t, "GET", k+"r")
	reader.silentFor(t, "a read while everything is paused", 200*time.Millisecond)
	if got := reader.reply(t); got != "$6\r\nbefore\r\n" {
		t.Errorf("the read once the pause is over: %q", got)
	}
	if took := time.Since(begun); took < 350*time.Millisecond {
		t.Errorf("the read was answered %v into a 400 ms pause", took)
	}
	for _, bad := range [][]string{{"CLIENT", "PAUSE", "-1"}, {"CLIENT", "PAUSE", "10", "SOME"}, {"CLIENT", "PAUSE"}} {
		if got := admin.do(t, bad...); !strings.HasPrefix(got, "-ERR") {
			t.Errorf("%v: %q, want an error", bad, got)
		}
	}
}
