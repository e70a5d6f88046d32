package guard

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/sale"
)

// The open sales' figures for the metrics endpoint and the sale page.

// SaleMetrics are one open sale's figures for the metrics endpoint: this proxy's buys by
// outcome, and Redis's stock and outbox.
type SaleMetrics struct {
	SKU       string
	Outcomes  []OutcomeCount
	Stock     int64
	Outbox    int64
	OutboxAge time.Duration // of the oldest entry; 0 when empty
	// Late is the sale's late orders, as the late-order watch last counted them.
	Late int64
	// StoredDelay and StoredDelayMax are the mean and the most of the time from buy to stored
	// of the last batch of orders the sink stored (outcome.lua, by Redis's clock), and StoredAt
	// when it did; zero before the first.
	StoredDelay, StoredDelayMax time.Duration
	StoredAt                    time.Time
	// State is the sale's state in Redis (sale.StateOpen, ...); Initial its stock when warmed,
	// summed over its buckets; Pending the orders sold in Redis that have no outcome from the
	// sink yet (buyers less outcomes): those MySQL has still to store.
	State   string
	Initial int64
	Pending int64
	// Served is whether this proxy answered buys of the sale within shownFor: a sale shown
	// only for its late orders was left by other proxies.
	Served bool
	// RateStarved is the time this proxy refused the sale's buys for want of a rate token
	// while its lease call was out (admit.Lease.Starved); 0 for a sale with no rate.
	RateStarved time.Duration
}

// OutcomeCount is a count of buys with one outcome.
type OutcomeCount struct {
	Outcome string
	Count   int64
}

// shownFor is how long a sale stays among those SaleMetrics reads after this proxy last
// answered one of its buys.
const shownFor = 10 * time.Minute

// shownSales picks the sales SaleMetrics reads, at most most: those whose buys this proxy
// answered within shownFor (recentSales; served says which), and those whose last read found
// late orders. A sale this proxy only heard of (a WARM's event) costs nothing, however many
// are open.
func (g *Guard) shownSales(now time.Time, most int) (picked []string, served map[string]bool) {
	picked = g.recentSince(now.Add(-shownFor), now.Add(-shownFor))
	served = make(map[string]bool, len(picked))
	for _, sku := range picked {
		served[sku] = true
	}
	g.lateMu.Lock()
	for sku := range g.lateShown {
		if _, ok := g.counters(sku); !ok {
			delete(g.lateShown, sku)
		} else if !slices.Contains(picked, sku) {
			picked = append(picked, sku)
		}
	}
	g.lateMu.Unlock()
	slices.Sort(picked)
	return picked[:min(len(picked), most)], served
}

// markLate records whether the last read of sku found late orders.
func (g *Guard) markLate(sku string, late bool) {
	g.lateMu.Lock()
	defer g.lateMu.Unlock()
	if !late {
		delete(g.lateShown, sku)
		return
	}
	if g.lateShown == nil {
		g.lateShown = map[string]bool{}
	}
	g.lateShown[sku] = true
}

// SaleMetrics returns the figures of the sales this proxy answered buys of within shownFor,
// open or ended (State says which), and of those with late orders, at most most of them,
// read from Redis in one pipeline: what it costs follows what is shown, not the sales open on
// the cluster. A sale whose state cannot be read is left out.
func (g *Guard) SaleMetrics(ctx context.Context, most int) []SaleMetrics {
	now := g.opt.Now()
	skus, served := g.shownSales(now, most)
	if len(skus) == 0 {
		return nil
	}
	rs := make([][]saleReads, len(skus)) // per bucket, as this proxy knows the sale's layout
	_, _ = g.rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sku := range skus {
			l := sale.OneBucket(sku)
			if v, ok := g.layouts.Load(sku); ok {
				l = v.(*saleLayout).l
			}
			for b := range l.Tags {
				k := l.Keys(b)
				rs[i] = append(rs[i], saleReads{state: p.HGet(ctx, k.Meta, "state"), late: p.HGet(ctx, k.Meta, "late"),
					stored: p.HMGet(ctx, k.Meta, "stored_delay_ms", "stored_delay_max_ms", "stored_at_ms", "initial"), stock: p.Get(ctx, k.Stock),
					outbox: p.XLen(ctx, k.Outbox), oldest: p.XRangeN(ctx, k.Outbox, "-", "+", 1),
					buyers: p.HLen(ctx, k.Buyers), outcomes: p.HLen(ctx, k.Result)})
			}
		}
		return nil
	})
	var out []SaleMetrics
	for i, sku := range skus {
		if len(out) == most {
			break
		}
		var late int64
		for _, r := range rs[i] {
			n, _ := r.late.Int64()
			late += n
		}
		g.markLate(sku, late > 0)
		state := rs[i][0].state.Val()
		if state == "" {
			continue // gone from Redis
		}
		c, _ := g.counters(sku)
		m := SaleMetrics{SKU: sku, Late: late, State: state, Served: served[sku], Outcomes: []OutcomeCount{
			{"order", c.successes.Load()}, {"duplicate", c.duplicates.Load()}, {"soldout", c.soldOut.Load()},
			{"closed", c.closed.Load()}, {"limited_rate", c.limitedRate.Load()}, {"limited_buyer", c.limitedBuyer.Load()},
			{"limited_denied", c.limitedDenied.Load()}}}
		if l := c.lease.Load(); l != nil {
			m.RateStarved, _ = l.Starved()
		}
		for _, r := range rs[i] {
			r.addTo(&m, now)
		}
		out = append(out, m)
	}
	return out
}

// saleReads are SaleMetrics's reads of one bucket of a sale.
type saleReads struct {
	state  *redis.StringCmd
	late   *redis.StringCmd
	stored *redis.SliceCmd // stored_delay_ms, stored_delay_max_ms, stored_at_ms
	stock  *redis.StringCmd
	outbox *redis.IntCmd
	oldest *redis.XMessageSliceCmd
	// buyers and outcomes are the lengths of the buyers' and the results' hashes.
	buyers, outcomes *redis.IntCmd
}

// addTo adds the bucket's figures to its sale's at now: its stock and outbox summed, the
// latest stored batch of any bucket, the oldest entry of any.
func (r saleReads) addTo(m *SaleMetrics, now time.Time) {
	n, _ := r.stock.Int64()
	m.Stock += n
	if v := r.stored.Val(); len(v) == 4 {
		m.Initial += metaMs(v[3])
		mean, most, at := metaMs(v[0]), metaMs(v[1]), metaMs(v[2])
		if at > 0 && time.UnixMilli(at).After(m.StoredAt) {
			m.StoredDelay, m.StoredDelayMax, m.StoredAt = time.Duration(mean)*time.Millisecond, time.Duration(most)*time.Millisecond, time.UnixMilli(at)
		}
	}
	m.Outbox += r.outbox.Val()
	m.Pending += max(0, r.buyers.Val()-r.outcomes.Val())
	if msgs := r.oldest.Val(); len(msgs) == 1 {
		ms, _, _ := strings.Cut(msgs[0].ID, "-")
		if t, err := strconv.ParseInt(ms, 10, 64); err == nil {
			m.OutboxAge = max(m.OutboxAge, now.Sub(time.UnixMilli(t)))
		}
	}
}

// metaMs reads a meta field of milliseconds as HMGET gives it (0 when missing or malformed).
func metaMs(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
