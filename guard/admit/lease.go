package admit

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Lease is one proxy's share of one sale's rate. The rate and burst are a token bucket kept
// in Redis with the sale; a proxy leases tokens from it in chunks (Share of a second's
// budget at a time, at least one) and spends them here, one per buy, with no Redis call. A
// lease is good for TTL: tokens left after that are not spent but given back to the bucket
// with the next lease call (or by Expire), so unused leases are never lost for good.
//
// The bound this gives, over any interval of length T, for N proxies: the buys admitted are at
// most burst + rate×T + N×chunk, where the N×chunk are the tokens each proxy held when the
// interval began. Take asks for the next lease when half a chunk is left, so a proxy under
// steady load never runs dry while its lease call travels.
type Lease struct {
	share float64
	ttl   time.Duration

	mu          sync.Mutex
	rate, burst int64
	chunk       int64
	tokens      int64
	expires     time.Time
	leasing     bool      // a lease call is in flight
	emptyUntil  time.Time // the bucket was short: ask again no sooner
	giveBack    int64     // expired tokens, returned with the next call
	// dry is emptyUntil in Unix ns while no token is in hand and no call may be made before
	// it (0 otherwise): Take refuses with no lock until then, as under a flood.
	dry atomic.Int64
	// starved is when a buy was last refused with no token in hand while a lease call was
	// out (zero: none since the call's answer): the stretch until the answer is time the
	// proxy held buyers waiting on Redis, not on the rate. starvedNs sums those stretches,
	// longestNs is the longest.
	starved              time.Time
	starvedNs, longestNs atomic.Int64
}

// LeaseCall is a lease to ask Redis for: Want tokens, and GiveBack tokens to return first.
type LeaseCall struct{ Want, GiveBack int64 }

// NewLease returns a Lease for a sale of rate buys per second and burst, leasing share
// (0-1] of a second's budget at a time, each lease good for ttl.
func NewLease(rate, burst int64, share float64, ttl time.Duration) *Lease {
	l := &Lease{share: share, ttl: ttl}
	l.setRate(rate, burst)
	return l
}

func (l *Lease) setRate(rate, burst int64) {
	l.rate, l.burst = rate, burst
	l.chunk = max(1, min(burst, int64(math.Ceil(float64(rate)*l.share))))
}

// Rate returns the sale's rate and burst as this proxy last learnt them.
func (l *Lease) Rate() (rate, burst int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate, l.burst
}

// SetRate takes a new rate and burst for the sale (SECKILL.LIMIT, or what a lease reply
// said). Tokens in hand stay; the next lease asks for the new chunk at once.
func (l *Lease) SetRate(rate, burst int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rate != l.rate || burst != l.burst {
		l.setRate(rate, burst)
		l.emptyUntil = time.Time{}
		l.dry.Store(0)
	}
}

// Take spends one token at now. ok false: none in hand, and retry says when the buyer might
// try again (at least a millisecond). call.Want above 0: the caller must make that lease
// call, then report it with Granted or Failed; no other call is asked for until then.
func (l *Lease) Take(now time.Time) (ok bool, retry time.Duration, call LeaseCall) {
	if d := l.dry.Load(); d != 0 && now.UnixNano() < d {
		return false, max(time.Millisecond, time.Duration(d-now.UnixNano())), LeaseCall{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(now)
	if l.tokens > 0 {
		l.tokens--
		ok = true
	}
	if !l.leasing && l.tokens <= l.chunk/2 && !now.Before(l.emptyUntil) {
		l.leasing = true
		call = LeaseCall{Want: l.chunk - l.tokens, GiveBack: l.giveBack}
		l.giveBack = 0
	}
	if !ok && l.leasing && l.starved.IsZero() {
		l.starved = now
	}
	if !ok {
		retry = max(time.Millisecond, l.emptyUntil.Sub(now), time.Second/time.Duration(max(1, l.rate)))
		if !l.leasing && l.tokens == 0 && now.Before(l.emptyUntil) {
			l.dry.Store(l.emptyUntil.UnixNano())
		}
	}
	return ok, retry, call
}

// expire moves the tokens of a lapsed lease to giveBack. While a lease call is in flight the
// tokens in hand are still spent, however late its answer: a renewal slowed by the rush it
// governs must not stop the sale. They lapse once it is answered (Granted or Failed).
func (l *Lease) expire(now time.Time) {
	if l.tokens > 0 && !l.leasing && !now.Before(l.expires) {
		l.giveBack += l.tokens
		l.tokens = 0
	}
}

// Granted reports a lease call's answer at now: granted tokens, the sale's rate and burst as
// Redis has them, and, when the bucket could not fill the call, retry: how long until it can.
func (l *Lease) Granted(now time.Time, call LeaseCall, granted, rate, burst int64, retry time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leasing = false
	l.endStarved(now)
	if rate != l.rate || burst != l.burst {
		l.setRate(rate, burst)
	}
	if granted > 0 {
		l.expire(now)
		l.tokens += granted
		l.expires = now.Add(l.ttl)
		l.dry.Store(0)
	}
	if granted < call.Want {
		l.emptyUntil = now.Add(max(retry, time.Millisecond))
	}
}

// Failed reports a lease call that got no answer: its give-back is kept for the next call,
// and none is asked for before backoff has passed.
func (l *Lease) Failed(now time.Time, call LeaseCall, backoff time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leasing = false
	l.endStarved(now)
	l.giveBack += call.GiveBack
	l.emptyUntil = now.Add(backoff)
	l.expire(now)
}

// endStarved closes a stretch of buys refused while a lease call was out; l.mu is held.
func (l *Lease) endStarved(now time.Time) {
	if l.starved.IsZero() {
		return
	}
	d := int64(now.Sub(l.starved))
	l.starved = time.Time{}
	l.starvedNs.Add(d)
	if d > l.longestNs.Load() {
		l.longestNs.Store(d)
	}
}

// Starved is the time this proxy refused buys for want of a token while its lease call was
// out (waiting on Redis, not on the rate), summed, and the longest such stretch. While the
// sale's master answers, each stretch is at most one lease round trip.
func (l *Lease) Starved() (total, longest time.Duration) {
	return time.Duration(l.starvedNs.Load()), time.Duration(l.longestNs.Load())
}

// Expire returns the tokens to give back at now (a lapsed lease's, and any left from a failed
// call), unless a lease call is in flight, which carries them itself. The caller returns
// them to Redis, and reports a failure with Failed(now, LeaseCall{GiveBack: n}, 0).
func (l *Lease) Expire(now time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(now)
	if l.leasing {
		return 0
	}
	n := l.giveBack
	l.giveBack = 0
	return n
}

// Drain takes every token in hand, to give back at shutdown.
func (l *Lease) Drain() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.tokens + l.giveBack
	l.tokens, l.giveBack = 0, 0
	return n
}

// Held is the tokens in hand and not lapsed at now.
func (l *Lease) Held(now time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leasing && !now.Before(l.expires) {
		return 0
	}
	return l.tokens
}
