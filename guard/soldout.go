package guard

import (
	"sync"
	"time"
)

// SoldOut is the in-process sold-out flag of each SKU: while a flag stands, a buy is
// answered SOLDOUT without any network call. A flag lapses after a re-probe interval, so a
// stale flag (a release or re-warm whose signal was missed) cannot last; Clear drops it at
// once. Time is a parameter, so tests need no sleeps.
//
// SoldOut is safe for concurrent use. Its zero value is not usable: use NewSoldOut.
type SoldOut struct {
	ttl   time.Duration
	flags sync.Map // sku -> int64 Unix nanoseconds at which the flag lapses
}

// NewSoldOut returns flags that lapse ttl after they are set.
func NewSoldOut(ttl time.Duration) *SoldOut { return &SoldOut{ttl: ttl} }

// Is reports whether sku is flagged sold out at now.
func (s *SoldOut) Is(sku string, now time.Time) bool {
	v, ok := s.flags.Load(sku)
	return ok && now.UnixNano() < v.(int64)
}

// Set flags sku sold out from now until the re-probe interval has passed.
func (s *SoldOut) Set(sku string, now time.Time) { s.flags.Store(sku, now.Add(s.ttl).UnixNano()) }

// Clear drops sku's flag.
func (s *SoldOut) Clear(sku string) { s.flags.Delete(sku) }
