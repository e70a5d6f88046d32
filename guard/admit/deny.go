package admit

import (
	"sync/atomic"
	"time"
)

// DenyList is the uids refused at once, each until its expiry. It is replaced whole (Set)
// by whoever reads it from Redis, and read with no lock.
type DenyList struct {
	m atomic.Pointer[map[string]int64] // uid -> expiry in Unix ms; 0: never
}

// Set replaces the list with m (uid -> expiry in Unix milliseconds, 0 for none). m must not
// change afterwards.
func (d *DenyList) Set(m map[string]int64) { d.m.Store(&m) }

// Len is the number of uids on the list, lapsed or not.
func (d *DenyList) Len() int {
	if m := d.m.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// Denied reports whether uid is refused at now, and for how long: a negative duration when
// the entry never expires.
func (d *DenyList) Denied(uid string, now time.Time) (bool, time.Duration) {
	m := d.m.Load()
	if m == nil || len(*m) == 0 {
		return false, 0
	}
	exp, ok := (*m)[uid]
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
