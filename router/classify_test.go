package router

import (
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestClassify: what a router with no upstream and no guard makes of each command: the
// answers it may write at once, the commands that take a goroutine, the ones that block, and
// Serve for everything else; one look-up each.
func TestClassify(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{})
	long := strings.Repeat("x", MaxCommandName+1)
	tests := []struct {
		cmd    string
		kind   Kind
		blocks bool
	}{
		{"PING", KindImmediate, false},
		{"ping hello", KindImmediate, false},
		{"PING a b", KindServe, false},
		{"ECHO hi", KindImmediate, false},
		{"ECHO", KindServe, false},
		{long + " a", KindImmediate, false},
		{"SUBSCRIBE ch", KindOwnGoroutine, false},
		{"psubscribe p*", KindOwnGoroutine, false},
		{"MONITOR", KindOwnGoroutine, false},
		{"WAIT 1 0", KindServe, true},
		{"WAITAOF 1 0 0", KindServe, true},
		{"SECKILL.STATUS sku uid WAIT 100", KindServe, true},
		{"SECKILL.STATUS sku uid", KindServe, false},
		{"SECKILL.BUY sku uid", KindServe, false}, // no guard: Serve answers it
		{"GET k", KindServe, false},               // no upstream: Serve answers it
		{"MULTI", KindServe, false},
	}
	for _, tc := range tests {
		s := r.NewSession("127.0.0.1:1")
		before := r.lookups.Load()
		cl := r.Classify(s, argsOf(tc.cmd))
		if cl.Kind != tc.kind || cl.Blocks != tc.blocks {
			t.Errorf("%.40q: kind %d blocks %v, want %d %v", tc.cmd, cl.Kind, cl.Blocks, tc.kind, tc.blocks)
		}
		if n := r.lookups.Load() - before; n > 1 {
			t.Errorf("%.40q: %d look-ups", tc.cmd, n)
		}
	}
}

// TestClassifyBySession: PING and ECHO are answered at once only outside MULTI and after AUTH;
// a session whose credentials changed goes through Serve, which rechecks it.
func TestClassifyBySession(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{Password: "pw"})
	s := r.NewSession("127.0.0.1:1")
	if k := r.Classify(s, argsOf("PING")).Kind; k != KindServe {
		t.Errorf("PING before AUTH: kind %d, want Serve's NOAUTH", k)
	}
	if got := serve(t, r, s, "AUTH pw"); got != "+OK\r\n" {
		t.Fatalf("AUTH = %q", got)
	}
	if k := r.Classify(s, argsOf("PING")).Kind; k != KindImmediate {
		t.Errorf("PING after AUTH: kind %d", k)
	}
	r.creds.Store(&credentials{}) // a reload: every session is looked at again
	if k := r.Classify(s, argsOf("PING")).Kind; k != KindServe {
		t.Errorf("PING of a session to recheck: kind %d, want Serve", k)
	}
}

// TestPeekChangesNothing: Peek, for a command gathered behind others, runs no check: a
// session to be closed is not closed by it (Serve closes it, after the commands before).
func TestPeekChangesNothing(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{Password: "pw"})
	s := r.NewSession("127.0.0.1:1")
	s.revoked = true
	for _, cmd := range []string{"GET k", "PING", "SUBSCRIBE c", "SECKILL.BUY sku uid"} {
		cl := r.Peek(s, argsOf(cmd))
		if s.Quit {
			t.Fatalf("Peek of %q closed the session", cmd)
		}
		if cmd == "SUBSCRIBE c" && cl.Kind != KindOwnGoroutine {
			t.Errorf("Peek of SUBSCRIBE: kind %d", cl.Kind)
		}
	}
	if got := serve(t, r, s, "GET k"); !s.Quit || got == "" {
		t.Fatalf("Serve of a revoked session: %q, quit %v", got, s.Quit)
	}
}
