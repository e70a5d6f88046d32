package guard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/xid"
	"go.uber.org/zap"

	"seckill-proxy/internal/salescan"
	"seckill-proxy/sale"
)

// An order is late when it has had no outcome from the sink for Options.LateAfter since it
// was sold. Nothing else shows such an order: its outbox entry is gone once Kafka has it, and
// CHECK's stock sum counts it "in flight". A proxy or sink on another topic, a consumer group
// stuck, or a topic deleted leaves orders late, and CHECK, the log and the metrics say so.

// lateOrder is one late order, as CHECK lists it.
type lateOrder struct {
	id, uid string
	qty     int64
	age     time.Duration
}

// lateBatch is how many buyers one HSCAN step of the late-order watch reads: the watch never
// blocks Redis with one big read of a hot sale's buyers, as CHECK's HGETALL may.
const lateBatch = 1000

// countLate counts the late orders of the bucket with hash tag tag at now with HSCAN over the buyers and HMGET of their
// outcomes, a batch at a time, and returns the first few ids and the oldest age.
func (g *Guard) countLate(ctx context.Context, tag string, now time.Time) (n int, first []string, oldest time.Duration, pending int, err error) {
	k := sale.KeysFor(tag)
	var cursor uint64
	for {
		var kv []string
		kv, cursor, err = g.rc.HScan(ctx, k.Buyers, cursor, "", lateBatch).Result()
		if err != nil {
			return 0, nil, 0, 0, err
		}
		st := saleState{all: make(map[string]string, len(kv)/2), results: map[string]string{}}
		var ids []string
		for i := 0; i+1 < len(kv); i += 2 {
			st.all[kv[i]] = kv[i+1]
			if id, _, _ := strings.Cut(kv[i+1], ":"); id != "released" && id != "r" {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			outcomes, err := g.rc.HMGet(ctx, k.Result, ids...).Result()
			if err != nil {
				return 0, nil, 0, 0, err
			}
			for i, o := range outcomes {
				if s, ok := o.(string); ok && s != "" {
					st.results[ids[i]] = s
				} else {
					pending++
				}
			}
		}
		for _, o := range g.lateOrders(st, now) {
			n++
			oldest = max(oldest, o.age)
			if len(first) < 10 {
				first = append(first, o.id)
			}
		}
		if cursor == 0 {
			return n, first, oldest, pending, nil
		}
	}
}

// lateOrders lists st's orders that have had no outcome for g.opt.LateAfter at now (Redis's
// clock), oldest first. An order's time is its id's (an xid, made by the proxy that sold it);
// an id that is not an xid is taken as late.
func (g *Guard) lateOrders(st saleState, now time.Time) []lateOrder {
	var out []lateOrder
	for uid, v := range st.all {
		if strings.HasPrefix(v, "released:") || strings.HasPrefix(v, "r:") {
			continue // a reservation is settled by the sweeper, not by the sink
		}
		id, qty, _ := strings.Cut(v, ":")
		if st.results[id] != "" {
			continue
		}
		age := g.opt.LateAfter
		if x, err := xid.FromString(id); err == nil {
			age = now.Sub(x.Time())
		}
		if age < g.opt.LateAfter {
			continue
		}
		q, _ := strconv.ParseInt(qty, 10, 64)
		out = append(out, lateOrder{id: id, uid: uid, qty: q, age: age})
	}
	slices.SortFunc(out, func(a, b lateOrder) int {
		if c := cmp.Compare(b.age, a.age); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return out
}

func (o lateOrder) String() string {
	return fmt.Sprintf("late order %s: uid %s qty %d, sold %s ago, no outcome from the sink", o.id, o.uid, o.qty, o.age.Truncate(time.Second))
}

// watchLate looks for late orders, each LateAfter/2, on one proxy of the cluster at a time
// (salescan.Lead, per outbox.late_after) (checkLate): it reads the buyers and outcomes
// counted of the buckets sold in (salescan), and for each bucket whose counts moved since a
// pass found every order with its outcome, reads its buyers and outcomes (HSCAN, a batch at
// a time), writes the count of late orders into the bucket's meta (field "late", which every
// proxy's metrics report), and logs them. Idle, settled sales cost nothing but their share
// of a full pass.
func (g *Guard) watchLate(ctx context.Context) {
	every := max(g.opt.LateAfter/2, 500*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	defer g.unlead(salescan.LateLeadKey(g.opt.LateAfter))
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := g.checkLate(ctx, every); err != nil && ctx.Err() == nil {
			g.log.Warn("late-order watch skipped", zap.Error(err))
		}
	}
}

// lateSeen is a sale's buyers and outcomes counted (HLEN) before a pass found every order
// with its outcome: while both stay the same, no order can be late, and the pass does not
// read the sale's buyers again (a closed sale of a million buyers costs two HLENs a pass).
type lateSeen struct{ buyers, results int64 }

// forgetSettled drops what the watch knew of sales that left the set.
func (g *Guard) forgetSettled(skus []string) {
	if g.lateSettled == nil {
		g.lateSettled = map[string]lateSeen{}
	}
	in := make(map[string]bool, len(skus))
	for _, s := range skus {
		in[s] = true
	}
	for tag := range g.lateSettled {
		if sku, _ := sale.SplitTag(tag); !in[sku] {
			delete(g.lateSettled, tag)
		}
	}
}

// latePassOrder is the order in which a pass looks at skus: sorted, from the first after the
// last one the previous pass looked at (after), round to it.
func latePassOrder(skus []string, after string) []string {
	slices.Sort(skus)
	i, found := slices.BinarySearch(skus, after)
	if found {
		i++
	}
	return append(skus[i:len(skus):len(skus)], skus[:i]...)
}

// lateFullEvery is how many passes of the late-order watch make one full pass: one in this
// many reads every open sale, the others only the buckets marked unsettled.
const lateFullEvery = 10

// checkLate is one pass of watchLate, if this proxy holds the watch's lease (for two
// passes); leaseFor is how long a bucket it counts is left to it. A pass reads the buckets
// marked unsettled (salescan.UnsettledKey: every bucket a proxy sold in) and takes out those
// whose every order has its outcome; every lateFullEvery-th pass, and the first this proxy
// leads, reads every open sale and marks those that are not settled.
func (g *Guard) checkLate(ctx context.Context, leaseFor time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, warmTimeoutFactor*g.opt.Buy.CallTimeout)
	defer cancel()
	if ok, err := salescan.LeadWhileSales(ctx, g.rc, salescan.LateLeadKey(g.opt.LateAfter), g.opt.Instance, 2*leaseFor, g.latePasses > 0); err != nil || !ok {
		g.latePasses = 0 // leading again starts with a full pass
		return err
	}
	full := g.latePasses%lateFullEvery == 0
	g.latePasses++
	buckets, err := g.lateBuckets(ctx, full)
	if err != nil {
		return err
	}
	var errs []error
	var settled, unsettled []string
	for _, b := range buckets {
		if sku, _ := sale.SplitTag(b.Tag); full && b.Tag == sku {
			g.lateFrom = sku
		}
		if b.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.Tag, b.Err))
			continue
		}
		done, err := g.checkLateBucket(ctx, b, leaseFor)
		if err != nil {
			return err
		}
		if done {
			settled = append(settled, b.Tag)
		} else {
			unsettled = append(unsettled, b.Tag)
		}
	}
	if full {
		if err := salescan.MarkNow(ctx, g.rc, salescan.UnsettledKey, unsettled); err != nil {
			errs = append(errs, err)
		}
	}
	if err := salescan.Unmark(ctx, g.rc, salescan.UnsettledKey, settled, salescan.Quiet); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// lateBuckets are the buckets a pass of the late-order watch reads: full, every open sale's;
// else those marked unsettled.
func (g *Guard) lateBuckets(ctx context.Context, full bool) ([]salescan.Bucket, error) {
	if !full {
		tags, err := salescan.List(ctx, g.rc, salescan.UnsettledKey)
		if err != nil {
			return nil, err
		}
		return salescan.Scan(ctx, g.rc, salescan.ForLate, tags), nil
	}
	skus, err := g.rc.SMembers(ctx, sale.SalesKey).Result()
	if err != nil {
		return nil, err
	}
	g.forgetSettled(skus)
	// A pass that runs out of time (many late sales, a slow Redis) ends where it is, and
	// the next begins after the last sale it looked at: every sale is looked at in turn.
	base := salescan.Scan(ctx, g.rc, salescan.ForLate, latePassOrder(skus, g.lateFrom))
	var extra []string // split sales' other buckets
	for _, b := range base {
		if tags, err := sale.ParseBuckets(b.Buckets); err == nil && b.HasMeta() {
			for _, t := range tags[1:] {
				extra = append(extra, sale.Tag(b.Tag, t))
			}
		}
	}
	return append(base, salescan.Scan(ctx, g.rc, salescan.ForLate, extra)...), nil
}

// checkLateBucket looks for late orders in the bucket b (a sale's own, or one of its stock
// buckets'), whose buyers and outcomes live together; settled says every order it holds has
// its outcome (or it holds no sale).
func (g *Guard) checkLateBucket(ctx context.Context, b salescan.Bucket, leaseFor time.Duration) (settled bool, err error) {
	tag := b.Tag
	k := sale.KeysFor(tag)
	seen := lateSeen{buyers: b.Buyers, results: b.Results}
	if g.lateSettled[tag] == seen || !b.HasMeta() {
		return true, nil // settled, and nothing was sold or stored since; or no sale
	}
	// A lease per bucket too, as proxies of earlier versions take it.
	if won, err := g.rc.SetNX(ctx, k.LateLease, g.opt.Instance, leaseFor).Result(); err != nil || !won {
		return false, err
	}
	now, err := g.rc.Time(ctx).Result()
	if err != nil {
		return false, err
	}
	n, ids, oldest, pending, err := g.countLate(ctx, tag, now)
	if err != nil {
		return false, err
	}
	if pending == 0 {
		g.lateSettled[tag] = seen
	} else {
		delete(g.lateSettled, tag)
	}
	if err := g.rc.HSet(ctx, k.Meta, "late", n, "late_checked_ms", now.UnixMilli()).Err(); err != nil {
		return false, err
	}
	if n > 0 {
		sku, bucket := sale.SplitTag(tag)
		g.log.Error("orders sold with no outcome from the sink: is every proxy and sink on the same topic, and is the sink running?",
			zap.String("sku", sku), zap.Int("bucket", bucket), zap.Int("late_orders", n), zap.Duration("oldest", oldest),
			zap.Duration("late_after", g.opt.LateAfter), zap.Strings("first_ids", ids), zap.String("route", b.Route))
	}
	return pending == 0, nil
}

// unlead gives up the lease key at Close, if this proxy holds it.
func (g *Guard) unlead(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), g.opt.Buy.CallTimeout)
	defer cancel()
	_ = salescan.Unlead(ctx, g.rc, key, g.opt.Instance)
}
