package guard

import (
	"sync/atomic"
	"testing"
)

// countingPending counts the marks it is asked for, and takes them while full is false.
type countingPending struct {
	marks map[string]int
	full  bool
}

func (p *countingPending) Mark(tag string) bool {
	p.marks[tag]++
	return !p.full
}

// TestMarkCallOncePerInterval: a bucket's calls mark it once per salescan.MarkEvery through
// the clock its attempts share; a mark the queue refused is asked for again with the next
// call; an attempt with no clock (a sale this proxy has no counters for) marks every call.
func TestMarkCallOncePerInterval(t *testing.T) {
	p := &countingPending{marks: map[string]int{}}
	g := &Guard{opt: Options{Pending: p}}
	var clock atomic.Int64
	a := &Attempt{tag: "s1", marked: &clock}
	for range 5 {
		g.markCall(a)
	}
	if p.marks["s1"] != 1 {
		t.Fatalf("5 calls within MarkEvery marked %d times, want 1", p.marks["s1"])
	}
	clock.Store(0) // MarkEvery has passed
	p.full = true
	g.markCall(a)
	g.markCall(a)
	if p.marks["s1"] != 3 {
		t.Fatalf("with the queue full, 2 calls marked %d times in all, want 3 (each asks again)", p.marks["s1"])
	}
	p.full = false
	g.markCall(a)
	g.markCall(a)
	if p.marks["s1"] != 4 {
		t.Fatalf("once the queue takes it, marks %d, want 4", p.marks["s1"])
	}
	u := &Attempt{tag: "s2"}
	g.markCall(u)
	g.markCall(u)
	if p.marks["s2"] != 2 {
		t.Fatalf("an attempt without a clock marked %d times for 2 calls, want 2", p.marks["s2"])
	}
}
