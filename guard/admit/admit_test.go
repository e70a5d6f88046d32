package admit

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestLeaseChunk(t *testing.T) {
	for _, tc := range []struct {
		rate, burst, want int64
	}{
		{1000, 100, 50}, // 5% of a second
		{1000, 20, 20},  // never more than the burst
		{10, 5, 1},      // at least one
		{100000, 100000, 5000},
	} {
		l := NewLease(tc.rate, tc.burst, 0.05, time.Second)
		_, _, call := l.Take(t0)
		if call.Want != tc.want {
			t.Errorf("rate %d burst %d: first lease asks %d, want %d", tc.rate, tc.burst, call.Want, tc.want)
		}
	}
}

func TestLeaseSpendsAndAsksAhead(t *testing.T) {
	l := NewLease(1000, 100, 0.05, time.Second)
	ok, retry, call := l.Take(at(0))
	if ok || retry != time.Millisecond || call.Want != 50 {
		t.Fatalf("empty lease: ok %v retry %v call %+v; want a refusal, 1ms, a call for 50", ok, retry, call)
	}
	if _, _, again := l.Take(at(0)); again.Want != 0 {
		t.Fatalf("a second call asked for while one is in flight: %+v", again)
	}
	l.Granted(at(1), call, 50, 1000, 100, 0)
	for i := range 24 {
		ok, _, c := l.Take(at(2))
		if !ok || c.Want != 0 {
			t.Fatalf("take %d: ok %v call %+v", i, ok, c)
		}
	}
	// The 25th take leaves half a chunk, so it asks to top up to a chunk.
	ok, _, call = l.Take(at(2))
	if !ok || call.Want != 25 {
		t.Fatalf("take at half a chunk: ok %v call %+v, want a call for 25", ok, call)
	}
	if got := l.Held(at(2)); got != 25 {
		t.Fatalf("held %d, want 25", got)
	}
}

func TestLeaseShortBucketWaits(t *testing.T) {
	l := NewLease(1000, 100, 0.05, time.Second)
	_, _, call := l.Take(at(0))
	l.Granted(at(1), call, 10, 1000, 100, 40*time.Millisecond)
	for range 10 {
		if ok, _, c := l.Take(at(2)); !ok || c.Want != 0 {
			t.Fatalf("a granted token refused, or a call asked before the bucket refilled: %v %+v", ok, c)
		}
	}
	ok, retry, c := l.Take(at(2))
	if ok || c.Want != 0 || retry != 39*time.Millisecond {
		t.Fatalf("dry lease: ok %v retry %v call %+v; want refused for 39ms with no call", ok, retry, c)
	}
	// Refused again with no lock while dry, the retry-after counting down.
	if ok, retry, c := l.Take(at(30)); ok || c.Want != 0 || retry != 11*time.Millisecond {
		t.Fatalf("dry lease later: ok %v retry %v call %+v; want refused for 11ms", ok, retry, c)
	}
	if _, _, c := l.Take(at(41)); c.Want != 50 {
		t.Fatalf("after the bucket's retry: call %+v, want 50", c)
	}
	l.Granted(at(42), LeaseCall{Want: 50}, 50, 1000, 100, 0)
	if ok, _, _ := l.Take(at(42)); !ok {
		t.Fatal("a granted lease still refuses: the dry mark was not cleared")
	}
}

func TestLeaseLapsedTokensGoBack(t *testing.T) {
	l := NewLease(1000, 100, 0.05, time.Second)
	_, _, call := l.Take(at(0))
	l.Granted(at(0), call, 50, 1000, 100, 0)
	l.Take(at(10))
	if n := l.Expire(at(999)); n != 0 {
		t.Fatalf("Expire before the TTL returned %d", n)
	}
	if n := l.Expire(at(1000)); n != 49 {
		t.Fatalf("Expire after the TTL returned %d, want 49", n)
	}
	if ok, _, call := l.Take(at(1000)); ok || call.GiveBack != 0 || call.Want != 50 {
		t.Fatalf("after expiry: ok %v call %+v", ok, call)
	}
	// A lapsed lease's tokens ride on the next lease call when there is one.
	l2 := NewLease(1000, 100, 0.05, time.Second)
	_, _, call = l2.Take(at(0))
	l2.Granted(at(0), call, 50, 1000, 100, 0)
	if ok, _, c := l2.Take(at(1500)); ok || c.GiveBack != 50 || c.Want != 50 {
		t.Fatalf("lapsed: ok %v call %+v, want refused and a call giving back 50", ok, c)
	}
	l2.Failed(at(1501), LeaseCall{Want: 50, GiveBack: 50}, 100*time.Millisecond)
	if n := l2.Expire(at(1502)); n != 50 {
		t.Fatalf("a failed call's give-back is lost: Expire = %d", n)
	}
}

// TestLeaseLateRenewalKeepsSelling: a renewal still in flight past the lease's TTL does not
// stop the sale: the tokens in hand are spent until it is answered, and what is left then
// lapses into the next call's give-back, never lost.
func TestLeaseLateRenewalKeepsSelling(t *testing.T) {
	l := NewLease(1000, 100, 0.05, time.Second)
	_, _, call := l.Take(at(0))
	l.Granted(at(0), call, 50, 1000, 100, 0)
	var renewal LeaseCall
	for i := range 25 { // down to half a chunk: the renewal is asked for
		_, _, c := l.Take(at(10))
		if c.Want > 0 {
			renewal = c
			if i != 24 {
				t.Fatalf("the renewal was asked for at take %d", i)
			}
		}
	}
	if renewal.Want == 0 {
		t.Fatal("no renewal asked for at half a chunk")
	}
	for i := range 5 { // the renewal is late: the TTL passes while it travels
		if ok, _, _ := l.Take(at(1500)); !ok {
			t.Fatalf("take %d past the TTL with a renewal in flight was refused", i)
		}
	}
	if n := l.Expire(at(1600)); n != 0 {
		t.Fatalf("Expire took %d tokens while a renewal was in flight", n)
	}
	l.Failed(at(2000), renewal, 100*time.Millisecond)
	if n := l.Expire(at(2000)); n != 20 {
		t.Fatalf("after the late renewal failed, Expire = %d, want the 20 left in hand", n)
	}
}

func TestLeaseRateChange(t *testing.T) {
	l := NewLease(1000, 100, 0.05, time.Second)
	_, _, call := l.Take(at(0))
	l.Granted(at(0), call, 0, 1000, 100, 50*time.Millisecond)
	l.SetRate(4000, 400)
	if ok, _, c := l.Take(at(1)); ok || c.Want != 200 {
		t.Fatalf("after raising the rate: ok %v call %+v, want a call for 200 at once", ok, c)
	}
	if r, b := l.Rate(); r != 4000 || b != 400 {
		t.Fatalf("rate %d burst %d", r, b)
	}
}

func TestAttempts(t *testing.T) {
	a := NewAttempts(3, time.Second, 1024)
	start := time.Unix(1_800_000_000, 0) // on a window boundary
	for i := range 3 {
		if ok, _ := a.Allow("u1", start.Add(time.Duration(i)*time.Millisecond)); !ok {
			t.Fatalf("attempt %d refused", i+1)
		}
	}
	ok, retry := a.Allow("u1", start.Add(10*time.Millisecond))
	if ok || retry != 990*time.Millisecond {
		t.Fatalf("4th attempt: ok %v retry %v; want refused for 990ms", ok, retry)
	}
	if ok, _ := a.Allow("u2", start.Add(10*time.Millisecond)); !ok {
		t.Fatal("another buyer refused")
	}
	// Half into the next window, the last one's 3 count for 3*500/1000 = 1 (rounded down),
	// so 2 more fit.
	next := start.Add(1500 * time.Millisecond)
	for i := range 2 {
		if ok, _ := a.Allow("u1", next); !ok {
			t.Fatalf("next window, attempt %d refused", i+1)
		}
	}
	if ok, retry := a.Allow("u1", next); ok || retry <= 0 || retry > 500*time.Millisecond {
		t.Fatalf("next window over the limit: ok %v retry %v", ok, retry)
	}
	// Two windows on, everything is forgotten.
	later := start.Add(3 * time.Second)
	for i := range 3 {
		if ok, _ := a.Allow("u1", later); !ok {
			t.Fatalf("two windows later, attempt %d refused", i+1)
		}
	}
}

func TestAttemptsBoundedMemory(t *testing.T) {
	a := NewAttempts(1, time.Second, 1024)
	if a.Capacity() != 1024 {
		t.Fatalf("capacity %d", a.Capacity())
	}
	now := time.Unix(1_800_000_000, 0)
	// Far more buyers than slots in one window: each still gets its first attempt, and the
	// table never grows.
	for i := range 100_000 {
		if ok, _ := a.Allow(fmt.Sprint("u", i), now); !ok {
			t.Fatalf("buyer %d refused a first attempt", i)
		}
	}
	if a.Capacity() != 1024 {
		t.Fatalf("the table grew to %d", a.Capacity())
	}
	// A buyer just counted is still known, whatever the flood did.
	if ok, _ := a.Allow("u99999", now); ok {
		t.Fatal("the last buyer's second attempt was allowed")
	}
}

func TestDenyList(t *testing.T) {
	var d DenyList
	if denied, _ := d.Denied(Hash("u1"), at(0)); denied {
		t.Fatal("an empty list denies")
	}
	d.Set(map[string]int64{"u1": 0, "u2": at(500).UnixMilli()})
	for _, tc := range []struct {
		uid    string
		now    time.Time
		denied bool
		left   time.Duration
	}{
		{"u1", at(0), true, -1},
		{"u2", at(100), true, 400 * time.Millisecond},
		{"u2", at(500), false, 0},
		{"u3", at(0), false, 0},
	} {
		denied, left := d.Denied(Hash(tc.uid), tc.now)
		if denied != tc.denied || left != tc.left {
			t.Errorf("%s at %v: %v %v, want %v %v", tc.uid, tc.now.Sub(t0), denied, left, tc.denied, tc.left)
		}
	}
}

// TestLeaseStarved: buys refused with no token while a lease call is out count as starved,
// from the first refusal to the call's answer; refusals while the bucket is merely empty (no
// call out, waiting for the rate) do not.
func TestLeaseStarved(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := NewLease(100, 10, 0.05, time.Second)
	ok, _, call := l.Take(t0)
	if ok || call.Want == 0 {
		t.Fatalf("first take: ok %v, call %+v; want a refusal and a lease call", ok, call)
	}
	if ok, _, _ := l.Take(t0.Add(30 * time.Millisecond)); ok {
		t.Fatal("a token with none leased yet")
	}
	l.Granted(t0.Add(250*time.Millisecond), call, 0, 100, 10, 40*time.Millisecond)
	if total, longest := l.Starved(); total != 250*time.Millisecond || longest != 250*time.Millisecond {
		t.Fatalf("starved %v (longest %v) after a call out for 250 ms; want 250ms", total, longest)
	}
	// The bucket was short: refusals until it may be asked again are the rate's, not Redis's.
	for i := range 5 {
		if ok, _, _ := l.Take(t0.Add(260*time.Millisecond + time.Duration(i)*time.Millisecond)); ok {
			t.Fatal("a token from an empty bucket")
		}
	}
	if total, _ := l.Starved(); total != 250*time.Millisecond {
		t.Fatalf("starved %v after refusals with no call out; want it unchanged", total)
	}
	ok, _, call = l.Take(t0.Add(300 * time.Millisecond))
	if ok || call.Want == 0 {
		t.Fatalf("take after the wait: ok %v, call %+v", ok, call)
	}
	l.Granted(t0.Add(310*time.Millisecond), call, call.Want, 100, 10, 0)
	if total, longest := l.Starved(); total != 260*time.Millisecond || longest != 250*time.Millisecond {
		t.Fatalf("starved %v (longest %v); want 260ms (longest 250ms)", total, longest)
	}
}
