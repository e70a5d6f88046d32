package upstream

import (
	"sync"
	"sync/atomic"
	"time"
)

// slotCacheAge bounds how long the slot cache keeps a slot's master past go-redis's slot map:
// a quarter of the map's own reload interval (about a second), so that a failover that
// go-redis has learned reaches pass-through at most this much later. Each epoch costs one
// go-redis lookup per slot in use, about 2 ms of CPU when all 16,384 are.
const slotCacheAge = 250 * time.Millisecond

// slotCacheNodes bounds the masters the cache can name; a slot whose master is past it is
// not cached.
const slotCacheNodes = 1 << 12

// slotCache remembers, for each slot, the master that go-redis's slot map named for it, so
// that routing a command costs two atomic loads from one 128 KiB table instead of a go-redis
// lookup that also reads the clock. Each entry packs the epoch it was made in with the
// master's index in addrs, plus one (0 is no entry). The epoch moves on slotCacheAge after the first entry of an epoch
// (no timer runs while nothing is routed), and at once on a MOVED reply. An entry made from a
// map that a concurrent MOVED made stale lives one epoch at most, and its commands are
// redirected meanwhile, as they would be without the cache.
type slotCache struct {
	epoch   atomic.Uint64
	armed   atomic.Bool
	entries [16384]atomic.Uint64

	mu    sync.Mutex               // guards adding to addrs
	addrs atomic.Pointer[[]string] // the masters seen, in the order first seen: never shrinks
}

func (s *slotCache) get(slot uint16) (string, bool) {
	v := s.entries[slot%16384].Load()
	if v == 0 || v>>12 != s.epoch.Load() {
		return "", false
	}
	addrs := s.addrs.Load()
	return (*addrs)[v&(slotCacheNodes-1)-1], true
}

func (s *slotCache) put(slot uint16, addr string) {
	i, ok := s.index(addr)
	if !ok {
		return
	}
	s.entries[slot%16384].Store(s.epoch.Load()<<12 | uint64(i+1))
	if s.armed.CompareAndSwap(false, true) {
		time.AfterFunc(slotCacheAge, func() {
			s.armed.Store(false)
			s.epoch.Add(1)
		})
	}
}

// index is addr's place in addrs, added if new, while there is room.
func (s *slotCache) index(addr string) (int, bool) {
	if p := s.addrs.Load(); p != nil {
		for i, a := range *p {
			if a == addr {
				return i, true
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var addrs []string
	if p := s.addrs.Load(); p != nil {
		addrs = *p
	}
	for i, a := range addrs {
		if a == addr {
			return i, true
		}
	}
	if len(addrs) >= slotCacheNodes-1 {
		return 0, false
	}
	grown := append(addrs[:len(addrs):len(addrs)], addr)
	s.addrs.Store(&grown)
	return len(grown) - 1, true
}

// forget drops every entry: the slot map changed.
func (s *slotCache) forget() { s.epoch.Add(1) }
