package proxy_test

import (
	"strings"
	"testing"

	"seckill-proxy/sale"
)

// untilReset reads replies until +RESET (a subscriber's messages may come before it), at most
// n of them.
func (rc *rawClient) untilReset(t *testing.T, n int) {
	t.Helper()
	for range n {
		if got := rc.reply(t); got == "+RESET\r\n" {
			return
		}
	}
	t.Fatalf("no +RESET within %d replies", n)
}

// TestResetAsRedis: RESET answers +RESET as Redis does after CLIENT REPLY OFF (and turns
// replies on again), and in subscriber mode, to Redis's channels or to an outcome channel
// (the subscriptions are dropped, and the connection is an ordinary one again); CLIENT KILL
// USER names only users that exist.
func TestResetAsRedis(t *testing.T) {
	s := start(t, nil)
	c := dialRaw(t, s.addr)
	c.send(t, "CLIENT", "REPLY", "OFF")
	c.send(t, "SET", "{"+newSKU("reset")+"}", "x")
	c.send(t, "RESET")
	c.send(t, "PING")
	if got := c.reply(t); got != "+RESET\r\n" {
		t.Fatalf("RESET after CLIENT REPLY OFF: %q, want +RESET", got)
	}
	if got := c.reply(t); got != "+PONG\r\n" {
		t.Fatalf("PING after RESET: %q, want +PONG", got)
	}

	ch := newSKU("resetch")
	if got := c.do(t, "SUBSCRIBE", ch); !strings.HasPrefix(got, "*3\r\n$9\r\nsubscribe\r\n") {
		t.Fatalf("SUBSCRIBE: %q", got)
	}
	c.send(t, "RESET")
	c.untilReset(t, 1)
	if got := c.do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after RESET in subscriber mode: %q, want +PONG (out of subscriber mode)", got)
	}
	w := dialRaw(t, s.addr)
	eventually(t, 5e9, "the subscription to end", func() bool { return w.do(t, "PUBLISH", ch, "m") == ":0\r\n" })

	if got := c.do(t, "SUBSCRIBE", sale.OutcomeChannel(newSKU("resetsku"), "u1")); !strings.HasPrefix(got, "*3\r\n$9\r\nsubscribe\r\n") {
		t.Fatalf("SUBSCRIBE to an outcome channel: %q", got)
	}
	c.send(t, "RESET")
	c.untilReset(t, 3)
	if got := c.do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after RESET with an outcome channel: %q, want +PONG", got)
	}

	if got := c.do(t, "CLIENT", "KILL", "USER", "nosuch"); got != "-ERR No such user 'nosuch'\r\n" {
		t.Errorf("CLIENT KILL USER nosuch: %q", got)
	}
	if got := c.do(t, "CLIENT", "KILL", "USER", "default", "SKIPME", "yes", "ID", "999999999"); got != ":0\r\n" {
		t.Errorf("CLIENT KILL USER default ID 999999999: %q, want :0", got)
	}
}
