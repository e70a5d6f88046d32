package upstream

import (
	"strconv"
	"testing"
	"time"
)

// TestSlotCache: an entry is served until a MOVED forgets it, or until its epoch ends,
// slotCacheAge after the epoch's first entry.
func TestSlotCache(t *testing.T) {
	var s slotCache
	if _, ok := s.get(7); ok {
		t.Fatal("an empty cache answered")
	}
	s.put(7, "a:1")
	if addr, ok := s.get(7); !ok || addr != "a:1" {
		t.Fatalf("get after put = %q %v", addr, ok)
	}
	s.forget()
	if _, ok := s.get(7); ok {
		t.Fatal("an entry outlived forget")
	}
	s.put(7, "b:2")
	start := time.Now()
	for {
		if _, ok := s.get(7); !ok {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("an entry outlived its epoch by seconds")
		}
		time.Sleep(time.Millisecond)
	}
	if age := time.Since(start); age < slotCacheAge/2 {
		t.Fatalf("an entry expired after %v, before its epoch's end", age)
	}
	s.put(8, "c:3") // a new epoch arms the clock again
	if addr, ok := s.get(8); !ok || addr != "c:3" {
		t.Fatalf("get in the next epoch = %q %v", addr, ok)
	}
}

// TestSlotCacheNodes: the cache names each master by its own index (or, once its epoch has
// ended, nothing), and caches nothing once it has seen as many masters as it can name.
func TestSlotCacheNodes(t *testing.T) {
	var s slotCache
	for i := range slotCacheNodes + 10 {
		addr := "n:" + strconv.Itoa(i)
		s.put(uint16(i), addr)
		got, ok := s.get(uint16(i))
		if i < slotCacheNodes-1 && ok && got != addr {
			t.Fatalf("slot %d: %q %v, want %q", i, got, ok, addr)
		}
		if i >= slotCacheNodes-1 && ok {
			t.Fatalf("slot %d past the bound named %q, want nothing", i, got)
		}
	}
	s.put(0, "n:0") // a master seen before the bound keeps its index
	if got, ok := s.get(0); !ok || got != "n:0" {
		t.Fatalf("slot 0 after the bound: %q %v", got, ok)
	}
}
