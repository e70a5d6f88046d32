package guard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
	g.flags.SetClosed(sku, sale.StateClosed, g.opt.Now(), g.flags.Gen())
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
	g.mark(sale.Tag(sku, l.Tags[home]))
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
	if flagged, why, _ := g.flags.Get(sku, g.opt.Now()); flagged && why != "" {
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
