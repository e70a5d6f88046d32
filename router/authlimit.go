package router

import (
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Failed AUTHs are bounded per source address and per user, not only per connection, so
// that a guesser who reconnects after every few guesses is slowed as much as one who does
// not: each source may fail authSourceBurst times, then once per authSourceEvery; each user
// authUserBurst times, then once per authUserEvery. While either is spent, an AUTH from that
// source, or for that user, is refused without its password being looked at (the right
// password too: a user under attack waits as long as its attacker does). The tables hold at
// most authTableMax entries; past it, entries that have refilled are forgotten first.
const (
	authSourceBurst = 20
	authSourceEvery = time.Second
	authUserBurst   = 100
	authUserEvery   = 100 * time.Millisecond
	authTableMax    = 1 << 16
	authTrustFor    = 24 * time.Hour
)

// trustedSources are the addresses that logged in as each user lately. Safe for concurrent
// use; the zero value is ready. At most authTableMax entries: past it, one of a sample that
// is oldest is forgotten.
type trustedSources struct {
	mu sync.Mutex
	m  map[string]time.Time // user NUL source -> last login
}

func (ts *trustedSources) add(user, source string, now time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[string]time.Time{}
	}
	key := user + "\x00" + source
	if _, ok := ts.m[key]; !ok && len(ts.m) >= authTableMax {
		oldest, seen := "", 0
		for k, at := range ts.m {
			if oldest == "" || at.Before(ts.m[oldest]) {
				oldest = k
			}
			if seen++; seen == evictSample {
				break
			}
		}
		delete(ts.m, oldest)
	}
	ts.m[key] = now
}

// has reports whether source logged in as user within authTrustFor of now.
func (ts *trustedSources) has(user, source string, now time.Time) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	at, ok := ts.m[user+"\x00"+source]
	return ok && now.Sub(at) < authTrustFor
}

// failureLimits are the per-key failure budgets of one kind (sources, or users). Safe for
// concurrent use; the zero value is not usable, see newFailureLimits.
type failureLimits struct {
	mu    sync.Mutex
	every rate.Limit
	burst int
	m     map[string]*rate.Limiter
}

func newFailureLimits(every time.Duration, burst int) *failureLimits {
	return &failureLimits{every: rate.Every(every), burst: burst, m: map[string]*rate.Limiter{}}
}

// spent reports whether key has no failure left at now, and when it will have one again.
func (f *failureLimits) spent(key string, now time.Time) (bool, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.m[key]
	if l == nil || l.TokensAt(now) >= 1 {
		return false, 0
	}
	r := l.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return true, d
}

// fail takes one failure from key's budget at now.
func (f *failureLimits) fail(key string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.m[key]
	if l == nil {
		if len(f.m) >= authTableMax {
			f.evict(now)
		}
		l = rate.NewLimiter(f.every, f.burst)
		f.m[key] = l
	}
	l.AllowN(now, 1)
}

// evictSample is how many entries evict looks at: a full table costs a failing AUTH a
// bounded amount of work, not a walk of the whole table.
const evictSample = 32

// evict forgets, among up to evictSample entries (Go's map order is random), those that have
// refilled, or, if none has, the first one looked at. The table stays bounded; a forgotten
// guesser starts again with a fresh budget, no larger than a new one's.
func (f *failureLimits) evict(now time.Time) {
	first, seen, freed := "", 0, false
	for k, l := range f.m {
		if seen == 0 {
			first = k
		}
		if l.TokensAt(now) >= float64(f.burst) {
			delete(f.m, k)
			freed = true
		}
		if seen++; seen == evictSample {
			break
		}
	}
	if !freed {
		delete(f.m, first)
	}
}

// sourceOf is remote's host, the key of a source: every port of one address is one source.
func sourceOf(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// authLimited answers an AUTH from s for user while the source's or the user's budget is
// spent: nil when it may be checked.
func (r *Router) authLimited(s *Session, user string, now time.Time) error {
	what, wait := "", time.Duration(0)
	if spent, d := r.auth.sources.spent(sourceOf(s.Remote), now); spent {
		what, wait = "from this address", d
		r.auth.limitedSource.Add(1)
	} else if spent, d := r.auth.users.spent(user, now); spent && !r.auth.trusted.has(user, sourceOf(s.Remote), now) {
		what, wait = "for this user", d
		r.auth.limitedUser.Add(1)
	} else {
		return nil
	}
	return respError("WRONGPASS too many failed AUTHs " + what + "; retry in " + strconv.FormatInt(wait.Milliseconds()+1, 10) + " ms")
}
