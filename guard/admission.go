package guard

import (
	"context"
	"hash/maphash"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"seckill-proxy/conf"
	"seckill-proxy/guard/admit"
	"seckill-proxy/sale"
)

// Admission: the checks a buy passes before it may go to Redis, in this order, each answered
// with no Redis call:
//  1. the deny list (LIMITED denied), read from Redis every admission.sync_interval and at
//     once on a "deny" event;
//  2. the buyer's attempts in the window (LIMITED buyer), counted on this proxy alone;
//  3. the sold-out and closed flags, and the buyers this proxy sold to (DUPLICATE);
//  4. the sale's rate (LIMITED rate), spent from tokens leased from the sale's bucket in Redis;
//  5. the SKU's waiting buys (BUSY), at most admission.max_waiting_per_sku.
// A buy that passes them goes to the script in the order it came.

// waitBuckets is how many counters of waiting buys there are: a SKU counts in the one its
// hash picks, so that the memory is fixed whatever SKUs clients name.
const waitBuckets = 4096

// leaseWorkers make the lease calls, so that no buy waits for one.
const leaseWorkers = 4

// admissionPoolSize is the connections per node of admission's own client (Guard.lc).
const admissionPoolSize = leaseWorkers

// leaseTimeout bounds one lease call: not the buy's call timeout, for a lease answered late
// still brings tokens, and the tokens in hand are spent meanwhile (admit.Lease).
func (g *Guard) leaseTimeout() time.Duration { return max(2*time.Second, 2*g.adm.opt.LeaseTTL) }

type admission struct {
	opt        conf.Admission                 // as at start; the reloadable limits are below
	attempts   atomic.Pointer[admit.Attempts] // nil: no per-buyer limit
	maxWaiting atomic.Int64                   // admission.max_waiting_per_sku
	maxDenied  atomic.Int64                   // admission.max_denied
	limitsMu   sync.Mutex                     // serialises SetAdmissionLimits
	limits     conf.Admission                 // the limits in force
	deny       admit.DenyList
	denyVer    string // the deny list's version last read

	ratesMu sync.Mutex                              // serialises changes of rates
	rates   atomic.Pointer[map[string]*admit.Lease] // the sales with a rate, as last learnt

	seed    maphash.Seed
	waiting [waitBuckets]atomic.Int64

	leases chan leaseCall
	kick   chan struct{}
	stale  map[string]bool // SKUs whose rate an event says changed, under ratesMu
	// unknown spends admission.unknown_sku_rate: the buys of SKUs this proxy knows nothing of.
	unknown *rate.Limiter

	limitedRate, limitedBuyer, limitedDenied, shed, knownDuplicates atomic.Int64
	leaseCalls, leasedTokens, leaseErrors, limitedUnknown           atomic.Int64
	// starvedNs and starvedLongestNs: buys refused for want of a token while a lease call
	// was out, over every sale (admit.Lease.Starved)
	starvedNs, starvedLongestNs atomic.Int64
	rateReads, syncRounds       atomic.Int64
}

type leaseCall struct {
	sku  string
	l    *admit.Lease
	call admit.LeaseCall
}

func newAdmission(opt conf.Admission) *admission {
	a := &admission{opt: opt, seed: maphash.MakeSeed(),
		leases: make(chan leaseCall, 256), kick: make(chan struct{}, 1),
		unknown: rate.NewLimiter(rate.Inf, 1)}
	if opt.UnknownSKURate > 0 {
		a.unknown = rate.NewLimiter(rate.Limit(opt.UnknownSKURate), opt.UnknownSKURate)
	}
	a.setLimits(opt)
	empty := map[string]*admit.Lease{}
	a.rates.Store(&empty)
	return a
}

// ReloadableAdmission are the admission settings SetAdmissionLimits changes while serving.
var ReloadableAdmission = []string{"admission.buyer_attempts", "admission.buyer_window",
	"admission.buyer_table", "admission.max_waiting_per_sku", "admission.max_denied"}

// SetAdmissionLimits puts opt's reloadable limits in force (a reload): the per-buyer limit
// (a change of it starts a new, empty table of attempts), the bound on a SKU's waiting buys
// and the deny list's bound. The other admission settings keep their values from start.
func (g *Guard) SetAdmissionLimits(opt conf.Admission) { g.adm.setLimits(opt) }

func (a *admission) setLimits(opt conf.Admission) {
	a.limitsMu.Lock()
	defer a.limitsMu.Unlock()
	old := a.limits
	if opt.BuyerAttempts != old.BuyerAttempts || opt.BuyerWindow != old.BuyerWindow || opt.BuyerTable != old.BuyerTable {
		var at *admit.Attempts
		if opt.BuyerAttempts > 0 {
			at = admit.NewAttempts(opt.BuyerAttempts, opt.BuyerWindow, opt.BuyerTable)
		}
		a.attempts.Store(at)
	}
	a.maxWaiting.Store(int64(opt.MaxWaitingPerSKU))
	a.maxDenied.Store(int64(opt.MaxDenied))
	a.limits = opt
}

// admitBuyer is checks 1 and 2, for r's uid of hash h (admit.Hash).
func (g *Guard) admitBuyer(r *BuyRequest, h uint64, now time.Time) error {
	a := g.adm
	if denied, left := a.deny.Denied(h, now); denied {
		a.limitedDenied.Add(1)
		g.countLimited(r.SKU, func(c *skuCounters) *atomic.Int64 { return &c.limitedDenied })
		return NewLimited(LimitedDenied, left)
	}
	if at := a.attempts.Load(); at != nil {
		if ok, retry := at.AllowHash(h, now); !ok {
			a.limitedBuyer.Add(1)
			g.countLimited(r.SKU, func(c *skuCounters) *atomic.Int64 { return &c.limitedBuyer })
			return NewLimited(LimitedBuyer, retry)
		}
	}
	return nil
}

// countLimited counts a limited buy in its SKU's counters, if the SKU has them.
func (g *Guard) countLimited(sku string, which func(*skuCounters) *atomic.Int64) {
	if c, ok := g.counters(sku); ok {
		which(c).Add(1)
	}
}

// saleLimit is a sale's per-user limit, for one version of the sale.
type saleLimit struct {
	version string
	limit   int64
}

// learnLimit keeps sku's per-user limit for version (a re-warmed sale has another version, and
// the limit learnt of the old one no longer answers for it).
func (g *Guard) learnLimit(sku, version string, limit int64) {
	if version == "" || limit <= 0 {
		return
	}
	if c, ok := g.counters(sku); ok {
		c.userLimit.Store(&saleLimit{version: version, limit: limit})
	}
}

// overLimit is the refusal of r, a buy of more units than its sale's per-user limit as this
// proxy knows it for the sale version it knows; nil when it does not know, or r is within it.
// It comes before the rate: a buy that cannot succeed spends no token of the sale's rate.
func (g *Guard) overLimit(r *BuyRequest, c *skuCounters) error {
	if c == nil || r.Qty <= 1 {
		return nil
	}
	l := c.userLimit.Load()
	if l == nil || r.Qty <= l.limit {
		return nil
	}
	if v, _ := g.versions.Load(r.SKU); v != l.version {
		return nil
	}
	return badArgs("qty %d is above the per-user limit %d", r.Qty, l.limit)
}

// admitRate is check 4, for a SKU with counters c (nil: none yet, and so no rate).
func (g *Guard) admitRate(sku string, c *skuCounters, now time.Time) error {
	if c == nil {
		return nil
	}
	l := c.lease.Load()
	if l == nil {
		return nil
	}
	ok, retry, call := l.Take(now)
	if call.Want > 0 || call.GiveBack > 0 {
		g.requestLease(sku, l, call, now)
	}
	if !ok {
		g.adm.limitedRate.Add(1)
		c.limitedRate.Add(1)
		// Under a flood the retry-after is the same for a millisecond at a time: one answer
		// serves every buy of that millisecond.
		if last := c.lastLimited.Load(); last != nil && last.retryMs() == (&LimitedError{RetryAfter: retry}).retryMs() {
			return last
		}
		e := NewLimited(LimitedRate, retry)
		c.lastLimited.Store(e)
		return e
	}
	return nil
}

// requestLease hands a lease call to the workers; with their queue full, it counts as failed.
func (g *Guard) requestLease(sku string, l *admit.Lease, call admit.LeaseCall, now time.Time) {
	select {
	case g.adm.leases <- leaseCall{sku: sku, l: l, call: call}:
	default:
		l.Failed(now, call, 10*time.Millisecond)
	}
}

// waitSlot is check 5: the counter of sku's waiting buys, taken; nil: the bound is reached.
func (g *Guard) waitSlot(sku string) (*atomic.Int64, bool) {
	bound := g.adm.maxWaiting.Load()
	if bound <= 0 {
		return nil, true
	}
	slot := &g.adm.waiting[maphash.String(g.adm.seed, sku)%waitBuckets]
	if slot.Add(1) > bound {
		slot.Add(-1)
		g.adm.shed.Add(1)
		g.stats.busy.Add(1)
		return nil, false
	}
	return slot, true
}

// errShed answers a buy of a SKU with too many buys waiting.
func errShed(sku string, bound int) error {
	return &busyError{msg: "BUSY " + strconv.Itoa(bound) + " buys of " + sku + " are waiting for redis; try again"}
}

type busyError struct{ msg string }

func (e *busyError) Error() string        { return e.msg }
func (e *busyError) Is(target error) bool { return target == ErrBusy }

// setRate makes sku's rate on this proxy rate and burst (0: none), as a WARM, a LIMIT, a sync
// or a lease reply says. The leases are in rates, to go through them, and in the SKU's
// counters, for the buy path.
func (g *Guard) setRate(sku string, rate, burst int64) {
	a := g.adm
	a.ratesMu.Lock()
	defer a.ratesMu.Unlock()
	cur := *a.rates.Load()
	l := cur[sku]
	switch {
	case rate <= 0 && l == nil:
		return
	case rate > 0 && l != nil:
		l.SetRate(rate, burst)
		return
	}
	next := maps.Clone(cur)
	if rate <= 0 {
		delete(next, sku)
		if c, ok := g.counters(sku); ok {
			c.lease.Store(nil)
		}
	} else {
		l := admit.NewLease(rate, burst, a.opt.LeaseShare, a.opt.LeaseTTL)
		next[sku] = l
		g.countersFor(sku).lease.Store(l) // a SKU with a rate has a sale
	}
	a.rates.Store(&next)
}

// leaseWorker makes lease calls until Close.
func (g *Guard) leaseWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case lc := <-g.adm.leases:
			g.lease(ctx, lc)
		}
	}
}

// lease makes one lease call and reports it to the lease.
func (g *Guard) lease(ctx context.Context, lc leaseCall) {
	g.adm.leaseCalls.Add(1)
	before, _ := lc.l.Starved()
	defer func() {
		after, longest := lc.l.Starved()
		g.adm.starvedNs.Add(int64(after - before))
		if int64(longest) > g.adm.starvedLongestNs.Load() {
			g.adm.starvedLongestNs.Store(int64(longest))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, g.leaseTimeout())
	defer cancel()
	v, err := leaseScript.Run(ctx, g.lc, sale.KeysFor(lc.sku).ScriptKeys(), lc.call.Want, lc.call.GiveBack).Int64Slice()
	now := g.opt.Now()
	if err != nil || len(v) != 4 {
		g.adm.leaseErrors.Add(1)
		lc.l.Failed(now, lc.call, 100*time.Millisecond)
		g.lc.ReloadState(context.Background()) // go-redis does not after "connection refused"
		if ctx.Err() == nil || g.ctx.Err() == nil {
			g.log.Warn("could not lease a sale's rate tokens; its buys are LIMITED until a lease comes", zap.String("sku", lc.sku), zap.Error(err))
		}
		return
	}
	if v[1] <= 0 {
		g.setRate(lc.sku, 0, 0) // the limit was lifted, or the sale is gone
		return
	}
	g.adm.leasedTokens.Add(v[0])
	lc.l.Granted(now, lc.call, v[0], v[1], v[2], time.Duration(v[3])*time.Millisecond)
}

// giveBackAll returns every token in hand to the sales' buckets, at Close.
func (g *Guard) giveBackAll() {
	ctx, cancel := context.WithTimeout(context.Background(), g.opt.Buy.CallTimeout)
	defer cancel()
	for sku, l := range *g.adm.rates.Load() {
		if n := l.Drain(); n > 0 {
			if err := leaseScript.Run(ctx, g.lc, sale.KeysFor(sku).ScriptKeys(), 0, n).Err(); err != nil {
				g.log.Warn("could not give back leased tokens at shutdown", zap.String("sku", sku), zap.Int64("tokens", n), zap.Error(err))
			}
		}
	}
}

// Limit changes sku's rate and burst on its open (or closed) sale: SECKILL.LIMIT. Every
// proxy takes it at once if it hears the event, else within admission.sync_interval of its
// next buy of the sale.
func (g *Guard) Limit(ctx context.Context, sku string, opt LimitOptions) (state string, err error) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	v, err := limitScript.Run(ctx, g.rc, sale.KeysFor(sku).ScriptKeys(), opt.Rate, opt.Burst).Slice()
	if err != nil {
		return "", unavailable(err)
	}
	if code := sale.Field(v, 0); code != "OK" {
		return "", closed(sale.Field(v, 1))
	}
	g.setRate(sku, opt.Rate, opt.Burst)
	g.signal(eventLimit, sku)
	g.log.Info("sale rate changed", zap.String("sku", sku), zap.Int64("rate", opt.Rate), zap.Int64("burst", opt.Burst))
	return sale.Field(v, 1), nil
}

// Deny puts uid on the deny list (SECKILL.DENY); it returns the list's length.
func (g *Guard) Deny(ctx context.Context, uid string, opt DenyOptions) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	v, err := denyScript.Run(ctx, g.rc, []string{sale.DenyKey, sale.DenyVersionKey}, "deny", uid,
		opt.TTL.Milliseconds(), g.adm.maxDenied.Load()).Slice()
	if err != nil {
		return 0, unavailable(err)
	}
	n, _ := strconv.ParseInt(sale.Field(v, 1), 10, 64)
	if sale.Field(v, 0) == "FULL" {
		return n, badArgs("the deny list holds %d uids, admission.max_denied; ALLOW some first", n)
	}
	g.afterDenyChange(uid)
	return n, nil
}

// Allow takes uid off the deny list (SECKILL.ALLOW): true if it was on it.
func (g *Guard) Allow(ctx context.Context, uid string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	v, err := denyScript.Run(ctx, g.rc, []string{sale.DenyKey, sale.DenyVersionKey}, "allow", uid).Slice()
	if err != nil {
		return false, unavailable(err)
	}
	removed := sale.Field(v, 1) == "1"
	if removed {
		g.afterDenyChange(uid)
	}
	return removed, nil
}

// afterDenyChange has this proxy re-read the list now, and the others told.
func (g *Guard) afterDenyChange(uid string) {
	g.kickSync()
	g.signal(eventDeny, "list")
	g.log.Info("deny list changed", zap.String("uid", uid))
}

// heldTokens is the rate tokens this proxy holds for sku now.
func (g *Guard) heldTokens(sku string) int64 {
	if l := (*g.adm.rates.Load())[sku]; l != nil {
		return l.Held(g.opt.Now())
	}
	return 0
}

// localRate is the rate this proxy applies to sku's buys now (0: none).
func (g *Guard) localRate(sku string) int64 {
	if l := (*g.adm.rates.Load())[sku]; l != nil {
		rate, _ := l.Rate()
		return rate
	}
	return 0
}
