package admit

import (
	"hash/maphash"
	"sync"
	"time"
)

// Attempts limits each buyer to K buys per window, counted in a fixed table: memory is
// Capacity×16 bytes whatever the number of buyers, and nothing is allocated per buyer.
//
// A buyer is their uid's 64-bit hash. Counts are a sliding window, estimated as Cloudflare's
// and nginx's limiters do: this window's count plus the last window's weighted by how much of
// it still overlaps. The table is open-addressed with a probe of probeLen slots; an entry
// last touched two windows ago is free. When every slot of a probe holds a live buyer, the one
// with the fewest attempts is forgotten: that takes more distinct buyers in one window than
// the table holds (about Capacity), and a forgotten buyer may then make up to K more attempts.
type Attempts struct {
	k      uint32
	window time.Duration
	shards []attemptShard
	mask   uint64 // per shard
}

type attemptShard struct {
	mu    sync.Mutex
	slots []attemptSlot
	_     [40]byte // keeps shards' locks off each other's cache lines
}

// attemptSlot is one buyer: the window number it was last counted in, and its attempts in
// that window and the one before.
type attemptSlot struct {
	key       uint64
	win       uint32
	cur, prev uint16
}

const (
	attemptShards = 16
	probeLen      = 8
	// MaxAttempts bounds K: a slot counts to 65,535.
	MaxAttempts = 1<<16 - 1
	// AttemptSlotBytes is one slot's memory.
	AttemptSlotBytes = 16
)

// NewAttempts returns a limit of k attempts per window, in a table of about capacity
// buyers (rounded up to a power of two, at least 1,024).
func NewAttempts(k int, window time.Duration, capacity int) *Attempts {
	per := uint64(1024 / attemptShards)
	for per*attemptShards < uint64(capacity) {
		per <<= 1
	}
	a := &Attempts{k: uint32(min(k, MaxAttempts)), window: window,
		shards: make([]attemptShard, attemptShards), mask: per - 1}
	for i := range a.shards {
		a.shards[i].slots = make([]attemptSlot, per)
	}
	return a
}

// Capacity is the table's size in buyers.
func (a *Attempts) Capacity() int { return len(a.shards) * len(a.shards[0].slots) }

// seed keys Hash: one per process.
var seed = maphash.MakeSeed()

// Hash is a uid's key in Attempts and DenyList.
func Hash(uid string) uint64 { return maphash.String(seed, uid) }

// Allow counts one attempt of uid's at now, if it is within the limit; otherwise ok is false
// and retry says how long until the buyer's count falls below it (at least a millisecond).
func (a *Attempts) Allow(uid string, now time.Time) (ok bool, retry time.Duration) {
	return a.AllowHash(Hash(uid), now)
}

// AllowHash is Allow for the uid of hash h (Hash).
func (a *Attempts) AllowHash(h uint64, now time.Time) (ok bool, retry time.Duration) {
	if h == 0 {
		h = 1 // 0 marks an empty slot
	}
	ns := now.UnixNano()
	win := uint32(ns / int64(a.window))
	into := time.Duration(ns % int64(a.window)) // how far into the window now is
	sh := &a.shards[h>>60]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.find(h, win, a.mask)
	switch {
	case s.key != h || win-s.win >= 2:
		*s = attemptSlot{key: h, win: win}
	case s.win != win:
		s.prev, s.cur, s.win = s.cur, 0, win
	}
	left := a.window - into
	est := uint64(s.cur) + uint64(s.prev)*uint64(left)/uint64(a.window)
	if est >= uint64(a.k) {
		if s.cur >= uint16(a.k) || s.prev == 0 {
			return false, max(time.Millisecond, left)
		}
		// Wait until enough of the last window has slid out of the estimate.
		need := est - uint64(a.k) + 1
		wait := time.Duration(need * uint64(a.window) / uint64(s.prev))
		return false, max(time.Millisecond, wait)
	}
	s.cur++
	return true, 0
}

// find returns h's slot, or the slot to put it in: a free one, else the least used.
func (sh *attemptShard) find(h uint64, win uint32, mask uint64) *attemptSlot {
	var free, least *attemptSlot
	for i := uint64(0); i < probeLen; i++ {
		s := &sh.slots[(h+i)&mask]
		switch {
		case s.key == h:
			return s
		case s.key == 0 || win-s.win >= 2:
			if free == nil {
				free = s
			}
		case least == nil || uint32(s.cur)+uint32(s.prev) < uint32(least.cur)+uint32(least.prev):
			least = s
		}
	}
	if free != nil {
		return free
	}
	return least
}
