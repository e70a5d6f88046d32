package guard

import "testing"

// TestSharesBoundEachUserAndAddress: one user, or one address, holds at most its share,
// whichever runs out first; what is released is taken again; other users and addresses are
// not touched by one that is full.
func TestSharesBoundEachUserAndAddress(t *testing.T) {
	s := NewShares(2, 0)
	a := ShareKeys("shop", "10.0.0.1:5000")
	b := ShareKeys("shop", "10.0.0.2:5000")
	c := ShareKeys("ops", "10.0.0.1:6000")
	d := ShareKeys("ops", "10.0.0.3:1")
	if !s.Take(a) || !s.Take(b) {
		t.Fatal("refused within the share")
	}
	if s.Take(a) {
		t.Fatal("user shop took a third")
	}
	if !s.Take(c) {
		t.Fatal("address 10.0.0.1 refused with one held")
	}
	if s.Take(c) {
		t.Fatal("address 10.0.0.1 took a third")
	}
	if !s.Take(d) {
		t.Fatal("another user at another address was refused")
	}
	s.Release(a, 1)
	if !s.Take(b) {
		t.Fatal("a released share was not taken again")
	}
	s.Release(b, 2)
	s.Release(c, 1)
	s.Release(d, 1)
	if len(s.held) != 0 {
		t.Fatalf("keys kept after every release: %v", s.held)
	}
	if ShareKeys("u", "not-an-address")[1] != "address not-an-address" {
		t.Fatal("an address without a port")
	}
	if !NewShares(0, 0).Take(a) {
		t.Fatal("no bound refused")
	}
}

// TestSharesFitASidecar: one user at one address (a sidecar's service) may take the pool but
// one share, past its own share, while nobody else holds anything; a second user then still
// finds a share free, and the first takes no more.
func TestSharesFitASidecar(t *testing.T) {
	s := NewShares(25, 100)
	app := ShareKeys("shop", "127.0.0.1:5000")
	for i := range 75 {
		if !s.Take(app) {
			t.Fatalf("the sidecar's own user refused its %dth, with %d of 100 held", i+1, i)
		}
	}
	if s.Take(app) {
		t.Fatal("the sidecar's user took the last share")
	}
	other := ShareKeys("ops", "10.0.0.9:1")
	for i := range 25 {
		if !s.Take(other) {
			t.Fatalf("another user refused its %dth of the share left", i+1)
		}
	}
	if s.Take(other) || s.Take(app) {
		t.Fatal("a take past the pool")
	}
	s.Release(app, 75)
	s.Release(other, 25)
	if s.total != 0 || len(s.held) != 0 {
		t.Fatalf("held after every release: %d, %v", s.total, s.held)
	}
}
