package upstream

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestBlockTimeout: each blocking command's timeout is read where Redis reads it, not from
// another number among its arguments; 0 is for ever; what Redis would refuse at once has none.
func TestBlockTimeout(t *testing.T) {
	for _, c := range []struct {
		cmd     string
		d       time.Duration
		forever bool
		ok      bool
	}{
		{"BLPOP a b 0", 0, true, true},
		{"blpop a 2.5", 2500 * time.Millisecond, false, true},
		{"BRPOP 5 0", 0, true, true}, // the key is named 5
		{"BRPOPLPUSH a b 0", 0, true, true},
		{"BLMOVE a b LEFT RIGHT 0.1", 100 * time.Millisecond, false, true},
		{"BZPOPMIN z 0", 0, true, true},
		{"BZPOPMAX z 7", 7 * time.Second, false, true},
		{"BLMPOP 0 1 k RIGHT COUNT 1", 0, true, true},
		{"BZMPOP 1.5 2 a b MIN", 1500 * time.Millisecond, false, true},
		{"XREAD COUNT 5 BLOCK 0 STREAMS s $", 0, true, true},
		{"XREAD BLOCK 250 STREAMS s $", 250 * time.Millisecond, false, true},
		{"XREAD COUNT 5 STREAMS block 0", 0, false, false}, // no BLOCK: a key named block
		{"XREADGROUP GROUP block c COUNT 1 BLOCK 0 STREAMS s >", 0, true, true},
		{"XREADGROUP GROUP g block STREAMS s >", 0, false, false},
		{"WAIT 1 0", 0, true, true},
		{"WAIT 0 100", 100 * time.Millisecond, false, true},
		{"WAITAOF 1 0 0", 0, true, true},
		{"BLPOP a -1", 0, false, false},
		{"BLPOP a nan", 0, false, false},
		{"BLPOP a inf", 0, false, false},
		{"BLPOP a 1e300", time.Duration(math.MaxInt64), false, true},
		{"XREAD BLOCK -5 STREAMS s $", 0, false, false},
		{"BLPOP a", 0, false, false},
		{"GET a", 0, false, false},
	} {
		d, forever, ok := blockTimeout(argsOf(c.cmd))
		if d != c.d || forever != c.forever || ok != c.ok {
			t.Errorf("%s: %v, forever %v, ok %v; want %v, %v, %v", c.cmd, d, forever, ok, c.d, c.forever, c.ok)
		}
	}
}

// TestBlockContext: a timeout of 0 gives a context with no deadline, on which a connection
// gets none (deadlineOf is zero); a finite one is bounded by it, the command timeout and a
// second; a plain context keeps the minute a command without a deadline gets.
func TestBlockContext(t *testing.T) {
	c := &Cluster{opt: Options{Timeout: 2 * time.Second}}
	ctx, cancel := c.blockContext(context.Background(), argsOf("BLPOP k 0"))
	if _, ok := ctx.Deadline(); ok || !deadlineOf(ctx).IsZero() {
		t.Errorf("BLPOP k 0: deadline %v", deadlineOf(ctx))
	}
	cancel()
	if ctx.Err() == nil {
		t.Error("cancel did not end the wait for ever")
	}
	ctx, cancel = c.blockContext(context.Background(), argsOf("BLPOP k 1"))
	defer cancel()
	if d := time.Until(deadlineOf(ctx)); d < 3900*time.Millisecond || d > 4*time.Second {
		t.Errorf("BLPOP k 1: deadline in %v, want 4 s", d)
	}
	if d := time.Until(deadlineOf(context.Background())); d < 59*time.Second || d > time.Minute {
		t.Errorf("no deadline: %v, want a minute", d)
	}
}

// FuzzBlockTimeout: whatever the arguments, reading the timeout does not panic, and says
// for ever only with no duration, and nothing when it cannot read one.
func FuzzBlockTimeout(f *testing.F) {
	for _, s := range []string{"BLPOP a 0", "XREAD COUNT 5 BLOCK 0 STREAMS s $", "BLMPOP 0 1 k LEFT", "WAIT 1 0", "XREADGROUP GROUP block c BLOCK 9 STREAMS s >", "BLPOP a 1e999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, forever, ok := blockTimeout(argsOf(s))
		switch {
		case d < 0:
			t.Fatalf("%q: %v", s, d)
		case forever && (d != 0 || !ok):
			t.Fatalf("%q: for ever with %v, ok %v", s, d, ok)
		case !ok && (d != 0 || forever):
			t.Fatalf("%q: not read, yet %v, forever %v", s, d, forever)
		}
	})
}
