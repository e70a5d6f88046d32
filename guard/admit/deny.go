package admit

import (
	"sync/atomic"
	"time"
)

// DenyList is the uids refused at once, each until its expiry. It is replaced whole (Set)
// by whoever reads it from Redis, and read with no lock. A uid is kept as its Hash, so that a
// buy hashes its uid once for every check; two uids share a 64-bit hash with odds of about
// n/2^64 for a list of n.
type DenyList struct {
	m atomic.Pointer[map[uint64]int64] // Hash(uid) -> expiry in Unix ms; 0: never
}

// Set replaces the list with m (uid -> expiry in Unix milliseconds, 0 for none).
func (d *DenyList) Set(m map[string]int64) {
	h := make(map[uint64]int64, len(m))
	for uid, exp := range m {
		h[Hash(uid)] = exp
	}
	d.m.Store(&h)
}

// Len is the number of uids on the list, lapsed or not.
func (d *DenyList) Len() int {
	if m := d.m.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// Denied reports whether the uid of hash h (Hash) is refused at now, and for how long: a
// negative duration when the entry never expires.
func (d *DenyList) Denied(h uint64, now time.Time) (bool, time.Duration) {
	m := d.m.Load()
	if m == nil || len(*m) == 0 {
		return false, 0
	}
	exp, ok := (*m)[h]
	switch {
	case !ok:
		return false, 0
	case exp == 0:
		return true, -1
	}
	left := time.Duration(exp-now.UnixMilli()) * time.Millisecond
	if left <= 0 {
		return false, 0
	}
	return true, left
}
