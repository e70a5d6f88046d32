package guard

import (
	"time"

	"maps"
	"seckill-proxy/guard/admit"
	"seckill-proxy/sale"
	"slices"
	"sync/atomic"
)

// The guard's counters: the whole proxy's (Stats), and each SKU's, with the answers and
// state made once per SKU that the buy path reads with no lock.

// Stats are a Guard's counters since it started. Read them with Guard.Stats.
type Stats struct {
	// Buys is every BUY that passed argument checks.
	Buys int64
	// LocalSoldOut is the buys answered SOLDOUT from the local flag, with no network call.
	LocalSoldOut int64
	// Scripts is the buy scripts sent to Redis, retries included; NoScript the buys among
	// them sent again as EVAL because their master did not have the script (a new or
	// promoted master, whose script cache starts empty).
	Scripts, NoScript int64
	// Successes, Duplicates, SoldOut, Closed and Unavailable count the buys' outcomes.
	Successes, Duplicates, SoldOut, Closed, Unavailable int64
	// WaitShort counts WAITs that came back with fewer replicas than asked for.
	WaitShort int64
	// WaitOff counts the turns whose calls went without WAIT because their master has no
	// replica in the cluster's view; NotKnown the buys answered UNAVAILABLE because their
	// call's WAIT came back short (ErrNotKnown).
	WaitOff, NotKnown int64
	// NoSale counts buys of a SKU with no sale answered from the no-sale table, and
	// LimitedUnknown the buys of unknown SKUs past admission.unknown_sku_rate (nosale.go).
	NoSale, LimitedUnknown int64
	// Events counts the sale events heard from other proxies; EventsIgnored those that Redis
	// did not bear out (or that were malformed), which changed nothing.
	Events, EventsIgnored int64
	// Limited counts the buys admission refused, by reason (see LimitedError); Shed the buys
	// answered BUSY because admission.max_waiting_per_sku of their SKU's were waiting;
	// KnownDuplicates the DUPLICATE answers from the buyers this proxy sold to.
	LimitedRate, LimitedBuyer, LimitedDenied, Shed, KnownDuplicates int64
	// Busy counts the buys answered BUSY: limits.max_inflight reached, or shed.
	Busy int64
	// Leases counts the lease calls for a sale's rate tokens, LeasedTokens the tokens they
	// got, and LeaseErrors those that failed. Denied is the deny list's length.
	Leases, LeasedTokens, LeaseErrors, Denied int64
	// RateStarved is the time buys were refused for want of a rate token while a lease call
	// was out (waiting on Redis, not on the rate), summed over the sales; RateStarvedLongest
	// the longest such stretch.
	RateStarved, RateStarvedLongest time.Duration
	// RateReads counts the sales' rates read from Redis (every sale's once at start, then
	// those of the sales bought here lately, and those an event named).
	RateReads int64
	// Drift counts the buys and releases refused because the sale's route differs from this
	// proxy's (ErrDrift).
	Drift int64
	// Donated counts the buys of split sales whose units a donor bucket gave (guard.Donate),
	// and Settled the reservations left between the donor steps that the sweeper settled.
	Donated, Settled int64
	// ToldByKafka counts the buys on a master with no replica online told their order once
	// Kafka held it (buy.no_replica kafka), RefusedNoReplica those refused (refuse), and
	// ToldUnreplicated those told with one copy (tell).
	ToldByKafka, RefusedNoReplica, ToldUnreplicated int64
}

type counters struct {
	buys, localSoldOut, scripts, noScript                     atomic.Int64
	successes, duplicates, soldOut, closed, unavailable, busy atomic.Int64
	waitShort, waitOff, noSale, drift, notKnown               atomic.Int64
	toldByKafka, refusedNoReplica, toldUnreplicated           atomic.Int64
	events, eventsIgnored                                     atomic.Int64
	donated, settled                                          atomic.Int64
}

// Stats returns a snapshot of the counters.
func (g *Guard) Stats() Stats {
	c := &g.stats
	return Stats{
		Buys: c.buys.Load(), LocalSoldOut: c.localSoldOut.Load(), Scripts: c.scripts.Load(), NoScript: c.noScript.Load(),
		Successes: c.successes.Load(), Duplicates: c.duplicates.Load(), SoldOut: c.soldOut.Load(),
		Closed: c.closed.Load(), Unavailable: c.unavailable.Load(), WaitShort: c.waitShort.Load(), WaitOff: c.waitOff.Load(), NotKnown: c.notKnown.Load(), NoSale: c.noSale.Load(), LimitedUnknown: g.adm.limitedUnknown.Load(),
		Events: c.events.Load(), EventsIgnored: c.eventsIgnored.Load(),
		LimitedRate: g.adm.limitedRate.Load(), LimitedBuyer: g.adm.limitedBuyer.Load(),
		LimitedDenied: g.adm.limitedDenied.Load(), Shed: g.adm.shed.Load(),
		KnownDuplicates: g.adm.knownDuplicates.Load(), Leases: g.adm.leaseCalls.Load(),
		LeasedTokens: g.adm.leasedTokens.Load(), LeaseErrors: g.adm.leaseErrors.Load(),
		RateStarved: time.Duration(g.adm.starvedNs.Load()), RateStarvedLongest: time.Duration(g.adm.starvedLongestNs.Load()), RateReads: g.adm.rateReads.Load(),
		Denied: int64(g.adm.deny.Len()), Busy: c.busy.Load(), Drift: c.drift.Load(),
		Donated: c.donated.Load(), Settled: c.settled.Load(),
		ToldByKafka: c.toldByKafka.Load(), RefusedNoReplica: c.refusedNoReplica.Load(), ToldUnreplicated: c.toldUnreplicated.Load(),
	}
}

// skuCounters are one SKU's buy outcomes in this proxy, and its answers made once, so that
// the sold-out path allocates nothing for them.
type skuCounters struct {
	successes, soldOut, duplicates, closed, local atomic.Int64
	soldOutErr, closedErr, endedErr               error
	keys                                          []string     // the scripts' keys, made once
	tag                                           string       // the keys' hash tag, made once
	marked                                        atomic.Int64 // Unix ns of the last pending mark (markCall)
	// flagging is set while the sold-out sale's buyers are read; buyers is the last read.
	flagging atomic.Bool
	buyers   atomic.Pointer[Buyers]
	// admission's refusals of this SKU's buys
	limitedRate, limitedBuyer, limitedDenied atomic.Int64
	lastLimited                              atomic.Pointer[LimitedError] // the last LIMITED rate answer
	lease                                    atomic.Pointer[admit.Lease]  // the sale's rate here; nil: none
	// userLimit is the sale's per-user limit as last read (its meta, or a LIMIT answer), with
	// the sale version it holds for: a buy of more is refused before it spends a rate token.
	userLimit atomic.Pointer[saleLimit]
	known     knownBuyers
	active    atomic.Int64 // Unix second of the last buy (touch)
}

// counters returns sku's counters if this proxy has served its sale.
func (g *Guard) counters(sku string) (*skuCounters, bool) {
	m := g.perSKU.Load()
	if m == nil {
		return nil, false
	}
	c, ok := (*m)[sku]
	return c, ok
}

// countersFor returns sku's counters, making them on first use. Only a SKU with a sale gets
// them, so that buys of made-up SKUs cannot grow the map (or SECKILL.INFO's list).
func (g *Guard) countersFor(sku string) *skuCounters {
	if c, ok := g.counters(sku); ok {
		return c
	}
	g.perSKUMu.Lock()
	defer g.perSKUMu.Unlock()
	if c, ok := g.counters(sku); ok {
		return c
	}
	next := map[string]*skuCounters{}
	if m := g.perSKU.Load(); m != nil {
		next = maps.Clone(*m)
	}
	c := &skuCounters{soldOutErr: soldOut(sku), closedErr: closed(sale.StateClosed), endedErr: closed(saleEnded), keys: sale.KeysFor(sku).ScriptKeys(), tag: sale.Tag(sku, 0)}
	next[sku] = c
	g.perSKU.Store(&next)
	return c
}

// skus lists the SKUs this proxy has counters for.
func (g *Guard) skus() []string {
	if m := g.perSKU.Load(); m != nil {
		return slices.Collect(maps.Keys(*m))
	}
	return nil
}
