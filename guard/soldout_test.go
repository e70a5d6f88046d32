package guard

import (
	"testing"
	"time"
)

func TestFlags(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	f := NewFlags(2 * time.Second)
	steps := []struct {
		do         func()
		at         time.Duration
		sku        string
		want, shut bool
	}{
		{nil, 0, "a", false, false},
		{func() { f.SetSoldOut("a", t0, nil, f.Gen()) }, 0, "a", true, false},
		{nil, 0, "b", false, false},
		{nil, 1999 * time.Millisecond, "a", true, false},
		{nil, 2 * time.Second, "a", false, false}, // lapsed: the next buy asks Redis again
		{func() { f.SetSoldOut("a", t0.Add(3*time.Second), nil, f.Gen()) }, 4 * time.Second, "a", true, false},
		{func() { f.Clear("a") }, 4 * time.Second, "a", false, false},
		{func() { f.Clear("never-set") }, 0, "never-set", false, false},
		{func() { f.SetClosed("c", "closed", t0, f.Gen()) }, time.Second, "c", true, true},
		{func() { f.SetSoldOut("c", t0, nil, f.Gen()) }, time.Second, "c", true, true}, // closed says more
		{nil, 3 * time.Second, "c", false, false},
		{func() { f.SetSoldOut("c", t0.Add(3*time.Second), nil, f.Gen()) }, 3 * time.Second, "c", true, false}, // once it lapsed
	}
	for i, st := range steps {
		if st.do != nil {
			st.do()
		}
		got, closed, _ := f.Get(st.sku, t0.Add(st.at))
		if got != st.want || (closed != "") != st.shut {
			t.Errorf("step %d: Get(%q, +%v) = %v, %v; want %v, %v", i, st.sku, st.at, got, closed, st.want, st.shut)
		}
	}
}

// BenchmarkSoldOutCheck is the sold-out path's in-process check: it must not allocate.
func BenchmarkSoldOutCheck(b *testing.B) {
	f := NewFlags(time.Minute)
	now := time.Now()
	f.SetSoldOut("sku_1001", now, &Buyers{Orders: map[string]string{"u1": "o1"}}, f.Gen())
	b.ReportAllocs()
	for b.Loop() {
		if ok, _, _ := f.Get("sku_1001", now); !ok {
			b.Fatal("not flagged")
		}
	}
}

// TestFlagsNotSetAfterAClear: a flag made from what was read before a Clear (a release, a
// re-warm) is not set after it.
func TestFlagsNotSetAfterAClear(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	f := NewFlags(time.Minute)
	gen := f.Gen()
	f.Clear("a")
	f.SetSoldOut("a", t0, nil, gen)
	f.SetClosed("a", "closed", t0, gen)
	if flagged, _, _ := f.Get("a", t0); flagged {
		t.Fatal("a flag read before a Clear was set after it")
	}
	f.SetSoldOut("a", t0, &Buyers{Orders: map[string]string{"u1": "o1"}}, f.Gen())
	_, _, b := f.Get("a", t0)
	if id, ok := b.order("u1"); !ok || id != "o1" {
		t.Fatalf("buyer u1: %q, %v; want o1", id, ok)
	}
	if _, ok := b.order("u2"); ok {
		t.Fatal("u2 is no buyer")
	}
}

// TestReservationIsNoOrder: a buyer whose entry is a split sale's pending reservation is not
// told an order from the sold-out flag's buyers (its buy goes to Redis, which answers
// RESERVED); a buyer with an order is.
func TestReservationIsNoOrder(t *testing.T) {
	b := &Buyers{Orders: map[string]string{"u1": "order-1", "u2": ""}}
	if id, dup := b.order("u1"); !dup || id != "order-1" {
		t.Fatalf("u1: %q %v", id, dup)
	}
	if id, dup := b.order("u2"); dup || id != "" {
		t.Fatalf("a reservation told as order %q", id)
	}
	if !b.reserved("u2") || b.reserved("u1") || b.reserved("u3") {
		t.Fatal("reserved() wrong")
	}
	var none *Buyers
	if none.reserved("u1") {
		t.Fatal("nil buyers reserved")
	}
}
