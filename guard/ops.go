package guard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/sale"
)

// Field is one field/value pair of an INFO or CHECK reply. Value is a string or an int64.
// Metric, beside it, is how /metrics exports a counter of INFO seckill; InfoOnly says that
// such a counter is shown in INFO only (the process collector has it already). The proxy's
// metrics are derived from these, and a test fails on a counter that has neither.
type Field struct {
	Name     string
	Value    any
	Metric   *Metric
	InfoOnly bool
}

// Metric is how a Field is exported to Prometheus.
type Metric struct {
	Name, Help string
	Gauge      bool
	// Outcome is the value of the outcome label, for one metric that several fields share
	// (seckill_proxy_buys_total: one field per outcome).
	Outcome string
}

// maxCheckOrders bounds the rejected orders CHECK lists one by one.
const maxCheckOrders = 1000

func noSale(sku string) error { return badArgs("no sale %s: it was never warmed", sku) }

// CloseSale ends sku's sale early: buys get CLOSED. The state is recorded in Redis, then in
// MySQL, and every proxy is told. Closing a closed sale changes nothing. It returns the state
// the sale had.
func (g *Guard) CloseSale(ctx context.Context, sku string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, warmTimeoutFactor*g.opt.Buy.CallTimeout)
	defer cancel()
	l, err := g.LayoutOf(ctx, sku)
	if err != nil {
		return "", err
	}
	// Bucket 0 first: from then on no buy of a proxy that reads it is let in.
	var prev string
	for b := range l.Tags {
		reply, err := closeScript.Run(ctx, g.rc, l.Keys(b).ScriptKeys()).Slice()
		if err != nil {
			return "", unavailable(err)
		}
		if b == 0 && sale.Field(reply, 0) != "OK" {
			return "", noSale(sku)
		}
		if b == 0 {
			prev = sale.Field(reply, 1)
		}
	}
	g.flags.SetClosed(sku, g.opt.Now(), g.flags.Gen())
	g.signal(eventClose, sku)
	if g.db != nil {
		if _, err := g.db.ExecContext(ctx, `UPDATE seckill_items SET status = ? WHERE sku = ?`, sale.StateClosed, sku); err != nil {
			return prev, unavailable(fmt.Errorf("the sale is closed in Redis, but MySQL did not record it (run CLOSE again): %w", err))
		}
	}
	if prev != sale.StateClosed {
		g.log.Info("sale closed", zap.String("sku", sku), zap.String("was", prev))
	}
	return prev, nil
}

// Released is what a RELEASE did.
type Released struct {
	OrderID string
	// Units is how many units went back to Redis stock (never above the initial stock).
	Units int64
	// Stock is the Redis stock after the release.
	Stock int64
	// Already is set when the order had been released before: nothing changed.
	Already bool
}

// Release gives a cancelled or unpaid order's units back: to Redis stock at once (never above
// the sale's initial stock), and, through a release event in the outbox and Kafka, to MySQL,
// where the sink marks the order cancelled. The buyer may buy again if buy.rebuy_after_release
// says so. A second release of the same order changes nothing.
func (g *Guard) Release(ctx context.Context, sku, uid string) (Released, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	rebuy := "0"
	if g.opt.Buy.RebuyAfterRelease {
		rebuy = "1"
	}
	// The release goes through the outbox: its sale must be one the sweepers visit (it may
	// have left the set, over and drained).
	if err := g.rc.SAdd(ctx, sale.SalesKey, sku).Err(); err != nil {
		return Released{}, unavailable(err)
	}
	l, err := g.LayoutOf(ctx, sku)
	if err != nil {
		return Released{}, err
	}
	home := l.HomeIndex(uid)
	reply, err := releaseScript.Run(ctx, g.rc, l.Keys(home).ScriptKeys(), uid, rebuy, g.opt.Instance, g.opt.Route).Slice()
	if err != nil {
		return Released{}, unavailable(err)
	}
	rr := sale.ParseReleaseReply(reply, sku, uid, g.opt.Instance)
	rr.Sold.Bucket, rr.Sold.Home = l.Tags[home], l.Tags[home]
	switch rr.Code {
	case "NONE":
		return Released{}, badArgs("%s has no order in sale %s", uid, sku)
	case "RESERVED":
		return Released{}, reservedErr(sku, rr.Arg)
	case "ALREADY":
		return Released{OrderID: rr.Arg, Already: true}, nil
	case "DRIFT":
		return Released{}, g.drifted(sku, rr.Arg)
	}
	r := Released{OrderID: rr.Arg, Units: rr.Units, Stock: rr.Stock}
	if g.opt.Publisher != nil {
		g.opt.Publisher.Publish(rr.Sold, nil)
	}
	g.clearFlag(sku)
	g.signal(eventRelease, sku)
	g.log.Info("order released", zap.String("sku", sku), zap.String("uid", uid), zap.String("order", r.OrderID), zap.Int64("units", r.Units))
	return r, nil
}

// saleState is a sale's Redis side, read in one round trip per stock bucket. For a split
// sale the figures are the sum of its buckets' (and the meta's counts too), and parts has
// each bucket's own.
type saleState struct {
	meta     map[string]string
	stock    int64
	buyers   int64
	outbox   int64
	reserved int64
	results  map[string]string // only when asked for
	all      map[string]string // uid -> buyer value, only when asked for
	layout   sale.Layout
	parts    []bucketState
}

// bucketState is one stock bucket's part of a sale.
type bucketState struct {
	tag                                   int
	initial, stock, buyers, outbox, dead  int64
	confirmed, rejected, cancelled, lates int64
}

// summedMeta are the meta's counts that each bucket keeps of its own, summed for the sale.
var summedMeta = []string{"initial", "confirmed", "rejected", "cancelled", "late", "dead"}

func (g *Guard) readSale(ctx context.Context, sku string, full bool) (saleState, error) {
	st := saleState{layout: sale.OneBucket(sku)}
	for b := 0; b < st.layout.K(); b++ {
		k := st.layout.Keys(b)
		pipe := g.rc.Pipeline()
		meta := pipe.HGetAll(ctx, k.Meta)
		stock := pipe.Get(ctx, k.Stock)
		buyers := pipe.HLen(ctx, k.Buyers)
		outbox := pipe.XLen(ctx, k.Outbox)
		reserved := pipe.ZCard(ctx, k.Reserved)
		var all, results *redis.MapStringStringCmd
		if full {
			all = pipe.HGetAll(ctx, k.Buyers)
			results = pipe.HGetAll(ctx, k.Result)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return saleState{}, unavailable(err)
		}
		m := meta.Val()
		if b == 0 {
			if len(m) == 0 {
				return saleState{}, noSale(sku)
			}
			st.meta = m
			if tags, err := sale.ParseBuckets(m["buckets"]); err == nil {
				st.layout.Tags = tags
			}
			if full {
				st.all, st.results = all.Val(), results.Val()
			}
		} else {
			for _, f := range summedMeta {
				st.meta[f] = strconv.FormatInt(metaInt(st.meta, f)+metaInt(m, f), 10)
			}
			if full {
				maps.Copy(st.all, all.Val())
				maps.Copy(st.results, results.Val())
			}
		}
		n, _ := stock.Int64()
		st.stock += n
		st.buyers += buyers.Val()
		st.outbox += outbox.Val()
		st.reserved += reserved.Val()
		st.parts = append(st.parts, bucketState{tag: st.layout.Tags[b], initial: metaInt(m, "initial"), stock: n,
			buyers: buyers.Val(), outbox: outbox.Val(), dead: metaInt(m, "dead"), confirmed: metaInt(m, "confirmed"),
			rejected: metaInt(m, "rejected"), cancelled: metaInt(m, "cancelled"), lates: metaInt(m, "late")})
	}
	return st, nil
}

func metaInt(meta map[string]string, field string) int64 {
	n, err := strconv.ParseInt(meta[field], 10, 64)
	if err != nil {
		f, _ := strconv.ParseFloat(meta[field], 64) // the rate's bucket keeps a fraction
		return int64(f)
	}
	return n
}

// Info reports sku's sale: its meta, stock, buyers, outbox backlog and the sink's counts from
// Redis, and this proxy's flag and outcome counters for it.
func (g *Guard) Info(ctx context.Context, sku string) ([]Field, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	st, err := g.readSale(ctx, sku, false)
	if err != nil {
		return nil, err
	}
	initial := metaInt(st.meta, "initial")
	flag := "none"
	if flagged, isClosed, _ := g.flags.Get(sku, g.opt.Now()); flagged && isClosed {
		flag = "closed"
	} else if flagged {
		flag = "soldout"
	}
	c, ok := g.counters(sku)
	if !ok {
		c = &skuCounters{} // this proxy has not served the sale yet
	}
	return append([]Field{
		{Name: "sku", Value: sku},
		{Name: "state", Value: st.meta["state"]},
		{Name: "version", Value: metaInt(st.meta, "version")},
		{Name: "start_ms", Value: metaInt(st.meta, "start")},
		{Name: "end_ms", Value: metaInt(st.meta, "end")},
		{Name: "limit", Value: metaInt(st.meta, "limit")},
		{Name: "initial_stock", Value: initial},
		{Name: "remaining_stock", Value: st.stock},
		{Name: "sold", Value: initial - st.stock},
		{Name: "buyers", Value: st.buyers},
		{Name: "outbox_backlog", Value: st.outbox},
		{Name: "confirmed", Value: metaInt(st.meta, "confirmed")},
		{Name: "rejected", Value: metaInt(st.meta, "rejected")},
		{Name: "cancelled", Value: metaInt(st.meta, "cancelled")},
		{Name: "local_flag", Value: flag},
		{Name: "local_successes", Value: c.successes.Load()},
		{Name: "local_soldout", Value: c.soldOut.Load()},
		{Name: "local_duplicates", Value: c.duplicates.Load()},
		{Name: "local_closed", Value: c.closed.Load()},
		{Name: "local_answers_without_redis", Value: c.local.Load()},
		{Name: "route", Value: st.meta["route"]},
		{Name: "late_orders", Value: metaInt(st.meta, "late")},
		{Name: "late_checked_ms", Value: metaInt(st.meta, "late_checked_ms")},
		{Name: "rate", Value: metaInt(st.meta, "rate")},
		{Name: "burst", Value: metaInt(st.meta, "burst")},
		{Name: "rate_tokens_in_redis", Value: metaInt(st.meta, "tokens")},
		{Name: "local_rate", Value: g.localRate(sku)},
		{Name: "rate_tokens_held", Value: g.heldTokens(sku)},
		{Name: "local_limited_rate", Value: c.limitedRate.Load()},
		{Name: "local_limited_buyer", Value: c.limitedBuyer.Load()},
		{Name: "local_limited_denied", Value: c.limitedDenied.Load()},
		{Name: "buckets", Value: int64(st.layout.K())},
		{Name: "reservations", Value: st.reserved},
	}, g.bucketFields(ctx, st)...), nil
}

// bucketFields are one INFO line per stock bucket, in Redis's INFO keyspace style:
// bucket_<i>:tag=<t>,master=<addr>,initial=<n>,stock=<n>,sold=<n>,buyers=<n>,outbox=<n>.
func (g *Guard) bucketFields(ctx context.Context, st saleState) []Field {
	out := make([]Field, 0, len(st.parts))
	for i, p := range st.parts {
		master, err := g.MasterOf(ctx, sale.Tag(st.layout.SKU, p.tag))
		if err != nil {
			master = "unknown"
		}
		out = append(out, Field{Name: "bucket_" + strconv.Itoa(i), Value: fmt.Sprintf("tag=%d,master=%s,initial=%d,stock=%d,sold=%d,buyers=%d,outbox=%d",
			p.tag, master, p.initial, p.stock, p.initial-p.stock, p.buyers, p.outbox)})
	}
	return out
}

// Sales lists the sales the sweepers visit (those not yet over and drained) together with
// those this proxy has served, sorted.
func (g *Guard) Sales(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	skus, err := g.rc.SMembers(ctx, sale.SalesKey).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	skus = append(skus, g.skus()...)
	slices.Sort(skus)
	return slices.Compact(skus), nil
}

// Check reconciles sku's sale in Redis with MySQL (invariant I5) and changes nothing. It
// returns no differences when they agree; otherwise one line per difference with both
// numbers:
//   - remaining stock: Redis's, plus the units of orders still in flight (sold in Redis, no
//     outcome from the sink yet), against MySQL's;
//   - buyers: Redis's buyers less those in flight and those MySQL rejected, against MySQL's
//     confirmed orders of this sale;
//   - the outbox backlog, against 0;
//   - orders that Redis sold and MySQL rejected (Redis's stock was above MySQL's: a hand-made
//     SET, or a decrement lost in a failover), against none, then each of them (at most
//     maxCheckOrders);
//   - outbox entries moved to the dead-letter stream because no one could read them;
//   - late orders: sold Options.LateAfter ago or more with no outcome from the sink, against
//     none, then each of them (at most maxCheckOrders), oldest first;
//   - the sale's route (where its orders go), against this proxy's.
func (g *Guard) Check(ctx context.Context, sku string) ([]string, error) {
	if g.db == nil {
		return nil, badArgs("CHECK needs MySQL, and this proxy has no database configured")
	}
	ctx, cancel := context.WithTimeout(ctx, warmTimeoutFactor*g.opt.Buy.CallTimeout)
	defer cancel()
	st, err := g.readSale(ctx, sku, true)
	if err != nil {
		return nil, err
	}
	now, err := g.rc.Time(ctx).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	var active, inFlight, inFlightQty, rejected int64
	var rejections []string
	for uid, v := range st.all {
		if strings.HasPrefix(v, "released:") || strings.HasPrefix(v, "r:") {
			continue // released, or a reservation (st.reserved counts them)
		}
		active++
		id, qty, _ := strings.Cut(v, ":")
		q, _ := strconv.ParseInt(qty, 10, 64)
		switch outcome := st.results[id]; {
		case outcome == "":
			inFlight++
			inFlightQty += q
		case strings.HasPrefix(outcome, "rejected"):
			rejected++
			rejections = append(rejections, fmt.Sprintf("rejected order %s: uid %s qty %d, %s", id, uid, q,
				strings.TrimPrefix(outcome, "rejected ")))
		}
	}
	first := metaInt(st.meta, "first_version")
	if first == 0 {
		first = metaInt(st.meta, "version")
	}
	var mysqlStock, confirmed int64
	if err := g.db.QueryRowContext(ctx, `SELECT stock FROM seckill_stock WHERE sku = ?`, sku).Scan(&mysqlStock); err != nil {
		return nil, unavailable(fmt.Errorf("mysql: %w", err))
	}
	if err := g.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM seckill_orders WHERE sku = ? AND sale_version >= ? AND status = 'confirmed'`,
		sku, first).Scan(&confirmed); err != nil {
		return nil, unavailable(fmt.Errorf("mysql: %w", err))
	}
	var diffs []string
	if st.stock+inFlightQty != mysqlStock {
		diffs = append(diffs, fmt.Sprintf("remaining stock: redis %d + %d in flight = %d, mysql %d",
			st.stock, inFlightQty, st.stock+inFlightQty, mysqlStock))
	}
	if settled := active - inFlight - rejected; settled != confirmed {
		diffs = append(diffs, fmt.Sprintf("buyers: redis %d (%d in flight, %d rejected) = %d settled, mysql %d confirmed",
			active, inFlight, rejected, settled, confirmed))
	}
	if st.outbox != 0 {
		diffs = append(diffs, fmt.Sprintf("outbox backlog: redis %d, want 0", st.outbox))
	}
	if st.reserved != 0 {
		diffs = append(diffs, fmt.Sprintf("reservations: %d buyers reserved while a donor bucket is asked, want 0 (the sweeper settles any left %s)", st.reserved, g.settleAge()))
	}
	if dead := metaInt(st.meta, "dead"); dead > 0 {
		diffs = append(diffs, fmt.Sprintf("dead letters: %d unreadable outbox entries moved to %s", dead, deadKeys(st.layout)))
	}
	if rejected > 0 {
		diffs = append(diffs, fmt.Sprintf("rejected orders: %d sold in Redis that MySQL refused", rejected))
		slices.Sort(rejections)
		if len(rejections) > maxCheckOrders {
			rejections = append(rejections[:maxCheckOrders], fmt.Sprintf("... and %d more rejected orders", len(rejections)-maxCheckOrders))
		}
		diffs = append(diffs, rejections...)
	}
	if late := g.lateOrders(st, now); len(late) > 0 {
		diffs = append(diffs, fmt.Sprintf("late orders: %d sold %s ago or more with no outcome from the sink, want none", len(late), g.opt.LateAfter))
		for _, o := range late[:min(len(late), maxCheckOrders)] {
			diffs = append(diffs, o.String())
		}
		if len(late) > maxCheckOrders {
			diffs = append(diffs, fmt.Sprintf("... and %d more late orders", len(late)-maxCheckOrders))
		}
	}
	if r := st.meta["route"]; !sale.RouteAccepts(r, g.opt.Route) {
		diffs = append(diffs, fmt.Sprintf("route: the sale sends its orders to %s, this proxy to %s (%s): this proxy's buys are refused", r, g.opt.Route, sale.RouteDiff(r, g.opt.Route)))
	}
	return diffs, nil
}

// deadKeys names the dead-letter streams of l's buckets.
func deadKeys(l sale.Layout) string {
	names := make([]string, l.K())
	for i := range l.Tags {
		names[i] = l.Keys(i).Dead
	}
	return strings.Join(names, ", ")
}

// LegacyStock is what the seeds' keys of a sale would hold: its remaining stock (ok false:
// no sale, the key would not exist).
func (g *Guard) LegacyStock(ctx context.Context, sku string) (stock int64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	st, err := g.readSale(ctx, sku, false)
	if errors.Is(err, ErrBadArgs) {
		return 0, false, nil // never warmed
	}
	if err != nil {
		return 0, false, err
	}
	return st.stock, true, nil
}

// HasBuyer says whether uid holds an order in the sale of sku (one released does not count).
func (g *Guard) HasBuyer(ctx context.Context, sku, uid string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	k, err := g.homeKeys(ctx, sku, uid, false)
	if err != nil {
		return false, err
	}
	v, err := g.rc.HGet(ctx, k.Buyers, uid).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, unavailable(err)
	}
	// a released order is no longer held, and a reservation is not one yet
	return !strings.HasPrefix(v, "released:") && !strings.HasPrefix(v, "r:"), nil
}

// Ping checks that every master answers a PING within ctx: the readiness probe.
func (g *Guard) Ping(ctx context.Context) error {
	return g.rc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		if err := m.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis %s: %w", m.Options().Addr, err)
		}
		return nil
	})
}

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
}

// OutcomeCount is a count of buys with one outcome.
type OutcomeCount struct {
	Outcome string
	Count   int64
}

// SaleMetrics returns the figures of the open sales this proxy has served (and of those with
// late orders), at most most of them (by SKU), read from Redis in one pipeline. A sale whose
// state cannot be read is left out.
func (g *Guard) SaleMetrics(ctx context.Context, most int) []SaleMetrics {
	skus := g.skus()
	slices.Sort(skus)
	if len(skus) == 0 {
		return nil
	}
	type reads struct {
		state  *redis.StringCmd
		late   *redis.StringCmd
		stock  *redis.StringCmd
		outbox *redis.IntCmd
		oldest *redis.XMessageSliceCmd
	}
	rs := make([][]reads, len(skus)) // per bucket, as this proxy knows the sale's layout
	_, _ = g.rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sku := range skus {
			l := sale.OneBucket(sku)
			if v, ok := g.layouts.Load(sku); ok {
				l = v.(*saleLayout).l
			}
			for b := range l.Tags {
				k := l.Keys(b)
				rs[i] = append(rs[i], reads{state: p.HGet(ctx, k.Meta, "state"), late: p.HGet(ctx, k.Meta, "late"), stock: p.Get(ctx, k.Stock),
					outbox: p.XLen(ctx, k.Outbox), oldest: p.XRangeN(ctx, k.Outbox, "-", "+", 1)})
			}
		}
		return nil
	})
	now := g.opt.Now()
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
		if rs[i][0].state.Val() != sale.StateOpen && late == 0 {
			continue // an ended sale is shown while it has late orders
		}
		c, _ := g.counters(sku)
		m := SaleMetrics{SKU: sku, Late: late, Outcomes: []OutcomeCount{
			{"order", c.successes.Load()}, {"duplicate", c.duplicates.Load()}, {"soldout", c.soldOut.Load()},
			{"closed", c.closed.Load()}, {"limited_rate", c.limitedRate.Load()}, {"limited_buyer", c.limitedBuyer.Load()},
			{"limited_denied", c.limitedDenied.Load()}}}
		for _, r := range rs[i] {
			n, _ := r.stock.Int64()
			m.Stock += n
			m.Outbox += r.outbox.Val()
			if msgs := r.oldest.Val(); len(msgs) == 1 {
				ms, _, _ := strings.Cut(msgs[0].ID, "-")
				if t, err := strconv.ParseInt(ms, 10, 64); err == nil {
					m.OutboxAge = max(m.OutboxAge, now.Sub(time.UnixMilli(t)))
				}
			}
		}
		out = append(out, m)
	}
	return out
}
