package guard

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Flags are the in-process flags of each SKU: sold out, or closed. While a flag stands, a buy
// is answered from it with no network call: a buyer who holds an order in the sale (by the
// flag's Buyers) is told DUPLICATE with that order's id, anyone else SOLDOUT (or CLOSED). A
// flag lapses after a re-probe interval, so a stale flag (a release, re-warm or signal that
// was missed) cannot last; Clear drops it at once. Time is a parameter, so tests need no
// sleeps.
//
// Flags is safe for concurrent use. Its zero value is not usable: use NewFlags.
type Flags struct {
	ttl time.Duration
	// flags maps sku -> flag, replaced whole under mu (flags change a few times a sale), so
	// that a buy reads it with no lock.
	flags atomic.Pointer[map[string]flag]
	// mu orders setting against clearing; gen counts Clears, so that a flag made from what
	// was read before a Clear is not set after it.
	mu  sync.Mutex
	gen atomic.Uint64
}

type flag struct {
	until  int64  // Unix nanoseconds at which the flag lapses
	closed string // closed rather than sold out: why, as the buy script says it ("closed", "ended")
	buyers *Buyers
}

// Buyers are a sold-out sale's buyers, read from Redis once it was sold out: no one can buy
// in it until a release or re-warm, which clear the flag. It is read-only once made.
type Buyers struct {
	// Version and Count are the sale's version and buyer count when it was read: while they
	// stand, it need not be read again.
	Version string
	Count   int64
	// Orders maps uid -> order id, "" for a reservation of a split sale still asking its
	// donor buckets (never told as an order: such a buyer's buy goes to Redis); nil when the
	// sale has more buyers than the proxy keeps (buy.sold_out_buyers), and then every flagged
	// buy is answered SOLDOUT.
	Orders map[string]string
}

// NewFlags returns flags that lapse ttl after they are set.
func NewFlags(ttl time.Duration) *Flags { return &Flags{ttl: ttl} }

// Get reports whether sku is flagged at now, why it is closed ("": sold out), and, for a
// sold-out flag, the sale's buyers.
func (f *Flags) Get(sku string, now time.Time) (flagged bool, closed string, buyers *Buyers) {
	m := f.flags.Load()
	if m == nil {
		return false, "", nil
	}
	fl, ok := (*m)[sku]
	if !ok || now.UnixNano() >= fl.until {
		return false, "", nil
	}
	return true, fl.closed, fl.buyers
}

// Gen is the count of Clears so far: pass it, taken before reading what a flag is made of, to
// SetSoldOut or SetClosed.
func (f *Flags) Gen() uint64 { return f.gen.Load() }

// SetSoldOut flags sku sold out from now until the re-probe interval has passed, with its
// buyers, unless a Clear came after gen. A live closed flag stays: closed says more than sold
// out.
func (f *Flags) SetSoldOut(sku string, now time.Time, buyers *Buyers, gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen.Load() != gen {
		return
	}
	if flagged, closed, _ := f.Get(sku, now); flagged && closed != "" {
		return
	}
	f.set(sku, flag{until: now.Add(f.ttl).UnixNano(), buyers: buyers}, true)
}

// set puts (or, with put false, drops) sku's flag; f.mu must be held.
func (f *Flags) set(sku string, fl flag, put bool) {
	next := map[string]flag{}
	if m := f.flags.Load(); m != nil {
		next = maps.Clone(*m)
	}
	if put {
		next[sku] = fl
	} else {
		delete(next, sku)
	}
	f.flags.Store(&next)
}

// SetClosed flags sku closed, for why (the buy script's word: "closed", "ended"), from now
// until the re-probe interval has passed, unless a Clear came after gen. A live flag that says
// the same stays as it is, read with no lock: a call of many buys answered CLOSED sets it
// once, not once per buy (each set copies the map of flags).
func (f *Flags) SetClosed(sku, why string, now time.Time, gen uint64) {
	if flagged, was, _ := f.Get(sku, now); flagged && was == why {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen.Load() == gen {
		f.set(sku, flag{until: now.Add(f.ttl).UnixNano(), closed: why}, true)
	}
}

// Clear drops sku's flag.
func (f *Flags) Clear(sku string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen.Add(1)
	f.set(sku, flag{}, false)
}

// order is uid's order id in the sale, if b knows it.
func (b *Buyers) order(uid string) (string, bool) {
	if b == nil {
		return "", false
	}
	id, ok := b.Orders[uid]
	return id, ok && id != ""
}

// reserved: uid holds a reservation, not an order (Orders).
func (b *Buyers) reserved(uid string) bool {
	if b == nil {
		return false
	}
	id, ok := b.Orders[uid]
	return ok && id == ""
}
