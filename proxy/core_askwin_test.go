package proxy

import "testing"

// TestAskWindow: a command whose reply size is unknown goes alone for its key, and teaches
// the size; past the window's bytes large ones wait and small ones have a reserve; one
// always goes when nothing is out; a release half empties the window before it wakes.
func TestAskWindow(t *testing.T) {
	w := askWindow{limit: 4 << 20}
	big, small := askKey([][]byte{[]byte("GET"), []byte("big")}), askKey([][]byte{[]byte("get"), []byte("small")})
	if big != askKey([][]byte{[]byte("gEt"), []byte("big")}) {
		t.Fatal("the hash depends on the command name's case")
	}
	charge, unknown, ok := w.ask(big)
	if !ok || !unknown || charge != askUnknown {
		t.Fatalf("the first GET big: %d %v %v", charge, unknown, ok)
	}
	if w.may(big) {
		t.Fatal("a second GET big went while the first's size was unknown")
	}
	if w.release(big, charge, true, 1<<20) {
		t.Fatal("a release woke with nobody waiting")
	}
	if w.out != 0 || len(w.unknown) != 0 {
		t.Fatalf("after the release: %d out, %d unknown", w.out, len(w.unknown))
	}
	var charges []int64
	for w.may(big) {
		c, u, _ := w.ask(big)
		if u {
			t.Fatal("GET big unknown after its reply")
		}
		charges = append(charges, c)
	}
	if len(charges) != 4 || w.out != 4<<20 {
		t.Fatalf("%d GETs of 1 MiB went in a window of 4 MiB (%d out)", len(charges), w.out)
	}
	if c, _, ok := w.ask(small); !ok || c != askUnknown {
		t.Fatal("a small command had no reserve in a full window")
	}
	w.release(small, askUnknown, true, 10)
	c := &client{}
	w.wait(c)
	w.wait(c)
	if len(w.waiting) != 1 {
		t.Fatalf("a client waits %d times", len(w.waiting))
	}
	if w.release(big, 1<<20, false, 1<<20) {
		t.Fatal("woke with the window three quarters full")
	}
	if !w.release(big, 1<<20, false, 1<<20) {
		t.Fatal("did not wake with the window half empty")
	}
	one := askWindow{limit: 1}
	if _, _, ok := one.ask(big); !ok {
		t.Fatal("nothing out, and a command did not go")
	}
	var off askWindow
	for range 1000 {
		if _, _, ok := off.ask(small); !ok && off.unknown[small] == 0 {
			t.Fatal("a window with no bound refused")
		}
	}
}

// BenchmarkAskKey: the ask window's hash of a command, which every pass-through command of an
// event loop pays: no allocation.
func BenchmarkAskKey(b *testing.B) {
	args := [][]byte{[]byte("GET"), []byte("user:1000:profile")}
	b.ReportAllocs()
	for b.Loop() {
		_ = askKey(args)
	}
}
