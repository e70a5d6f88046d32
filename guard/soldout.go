package guard

import (
	"sync"
	"time"
)

// Flags are the in-process flags of each SKU: sold out, or closed. While a flag stands, a buy
// is answered from it with no network call. A flag lapses after a re-probe interval, so a
// stale flag (a release, re-warm or signal that was missed) cannot last; Clear drops it at
// once. Time is a parameter, so tests need no sleeps.
//
// Flags is safe for concurrent use. Its zero value is not usable: use NewFlags.
type Flags struct {
	ttl   time.Duration
	flags sync.Map // sku -> flag
}

type flag struct {
	until  int64 // Unix nanoseconds at which the flag lapses
	closed bool  // closed rather than sold out
}

// NewFlags returns flags that lapse ttl after they are set.
func NewFlags(ttl time.Duration) *Flags { return &Flags{ttl: ttl} }

// Get reports whether sku is flagged at now, and whether the flag says closed (else sold
// out).
func (f *Flags) Get(sku string, now time.Time) (flagged, closed bool) {
	v, ok := f.flags.Load(sku)
	if !ok {
		return false, false
	}
	fl := v.(flag)
	if now.UnixNano() >= fl.until {
		return false, false
	}
	return true, fl.closed
}

// SetSoldOut flags sku sold out from now until the re-probe interval has passed. A live
// closed flag stays: closed says more than sold out.
func (f *Flags) SetSoldOut(sku string, now time.Time) {
	if flagged, closed := f.Get(sku, now); flagged && closed {
		return
	}
	f.flags.Store(sku, flag{until: now.Add(f.ttl).UnixNano()})
}

// SetClosed flags sku closed from now until the re-probe interval has passed.
func (f *Flags) SetClosed(sku string, now time.Time) {
	f.flags.Store(sku, flag{until: now.Add(f.ttl).UnixNano(), closed: true})
}

// Clear drops sku's flag.
func (f *Flags) Clear(sku string) { f.flags.Delete(sku) }
