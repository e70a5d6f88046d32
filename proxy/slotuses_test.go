package proxy

import (
	"math/rand/v2"
	"testing"
)

// TestSlotUses: random adds and dones over few and many slots give what a plain map gives,
// through the move to the map and back.
func TestSlotUses(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s slotUses
	ref := map[uint16]slotUse{}
	addrs := []string{"a:1", "b:2", "c:3"}
	for i := range 200000 {
		spread := 8
		if i/20000%2 == 1 {
			spread = 200 // past slotUsesFew, into the map
		}
		slot := uint16(rng.IntN(spread))
		if u, ok := ref[slot]; ok && rng.IntN(2) == 0 {
			empty := s.done(slot)
			if u.n <= 1 {
				delete(ref, slot)
			} else {
				u.n--
				ref[slot] = u
			}
			if _, left := ref[slot]; empty == left {
				t.Fatalf("step %d: done(%d) = %v, the map has it: %v", i, slot, empty, left)
			}
		} else {
			addr := addrs[rng.IntN(len(addrs))]
			s.add(slot, addr)
			u := ref[slot]
			ref[slot] = slotUse{slot: slot, addr: addr, n: u.n + 1}
		}
		if s.len() != len(ref) {
			t.Fatalf("step %d: %d slots, want %d", i, s.len(), len(ref))
		}
		probe := uint16(rng.IntN(spread))
		got, ok := s.get(probe)
		want, wok := ref[probe]
		if ok != wok || got != want {
			t.Fatalf("step %d: get(%d) = %+v %v, want %+v %v", i, probe, got, ok, want, wok)
		}
	}
	for slot := range ref {
		for !s.done(slot) {
		}
	}
	if s.len() != 0 || s.many != nil {
		t.Fatalf("after every slot is done: %d left, map %v", s.len(), s.many != nil)
	}
}
