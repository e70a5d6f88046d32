package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/internal/salescan"
	"seckill-proxy/sale"
)

// Sweeper republishes outbox entries that the tee did not get acknowledged: orders of a proxy
// killed between the script and Kafka, or sold while Kafka was down. Every proxy runs one,
// and one of those on a Kafka topic sweeps at a time (a lease in Redis, salescan.Lead), so
// that what the sweeping costs Redis does not grow with the sidecars; a bucket with entries
// to publish is taken with a lease of its own too, as proxies of earlier versions take it.
// A duplicate still reaches Kafka now and then: the sink stores each order once.
//
// It finds the outboxes through the set of sales (sale.SalesKey), never by scanning the
// keyspace, and reads them all through salescan; a sale leaves the set once it is over and
// its outbox is empty. Build it with NewSweeper; Run blocks until ctx ends.
type Sweeper struct {
	rc       *redis.ClusterClient
	tee      *Tee
	cfg      conf.Outbox
	instance string
	log      *zap.Logger

	settler Settler
	// fence says how many replicas must hold what a master's outboxes were read to hold
	// before the entries may be published (nil: none); see FenceWith.
	fence  func(addr string) (int, time.Duration)
	fenced atomic.Int64 // sweeps of a master's outboxes left alone: WAIT came back short

	buried, retired, republished, drifted atomic.Int64
	scanned                               atomic.Int64         // sales read by the sweeps
	leading                               atomic.Bool          // this proxy swept in its last interval
	driftLogged                           map[string]time.Time // sku -> when its drift was last logged
}

// Settler settles a split sale's old reservations in one bucket (guard.Guard does): buyers
// reserved at home while a proxy asked a donor bucket for their units, and left so by a proxy
// that stopped between the steps. It also hears of each sale the sweeper retires, to forget
// it (Retired).
type Settler interface {
	SettleReservations(ctx context.Context, l sale.Layout, bucket int, now time.Time) error
	Retired(sku string)
}

// SweeperStats are a sweeper's counters.
type SweeperStats struct {
	// Buried counts unreadable outbox entries moved to dead letters; Retired, the sales taken
	// out of the set once over and drained; Republished, the entries published again;
	// Drifted, the sweeps of a sale left alone because its route is not this proxy's.
	Buried, Retired, Republished, Drifted int64
}

// Stats returns a snapshot of the counters.
func (s *Sweeper) Stats() SweeperStats {
	return SweeperStats{Buried: s.buried.Load(), Retired: s.retired.Load(), Republished: s.republished.Load(), Drifted: s.drifted.Load()}
}

// InfoFields are the sweeper's counters, for INFO seckill and the metrics.
func (s *Sweeper) InfoFields() []guard.Field {
	st := s.Stats()
	return []guard.Field{
		{Name: "outbox_republished", Value: st.Republished, Metric: &guard.Metric{Name: "seckill_proxy_outbox_republished_total", Help: "Outbox entries the sweeper published again."}},
		{Name: "outbox_buried", Value: st.Buried, Metric: &guard.Metric{Name: "seckill_proxy_outbox_dead_total", Help: "Unreadable outbox entries moved to the dead-letter stream."}},
		{Name: "outbox_fenced", Value: s.fenced.Load(), Metric: &guard.Metric{Name: "seckill_proxy_outbox_fenced_total", Help: "Sweeps of a master's outboxes that published nothing: no replica acknowledged what they read (a master failing over, paused or cut off)."}},
		{Name: "outbox_sweep_leader", Value: b2i(s.leading.Load()), Metric: &guard.Metric{Name: "seckill_proxy_outbox_sweep_leader", Help: "1 while this proxy sweeps the outboxes of its Kafka topic's sales (it holds the sweep lease), else 0.", Gauge: true}},
		{Name: "outbox_sales_scanned", Value: s.scanned.Load(), Metric: &guard.Metric{Name: "seckill_proxy_outbox_sales_scanned_total", Help: "Sales the sweeps read (every open sale, each sweep of the leader)."}},
		{Name: "outbox_drifted", Value: st.Drifted, Metric: &guard.Metric{Name: "seckill_proxy_outbox_drifted_total", Help: "Sweeps of a sale left alone because the sale's orders go to another topic than this proxy's."}},
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// NewSweeper returns a sweeper that republishes through tee, and settles split sales'
// reservations with settler (nil: it leaves them).
func NewSweeper(rc *redis.ClusterClient, tee *Tee, cfg conf.Outbox, instance string, settler Settler, log *zap.Logger) *Sweeper {
	return &Sweeper{rc: rc, tee: tee, cfg: cfg, instance: instance, settler: settler, log: log.Named("sweeper")}
}

// FenceWith has the sweeper publish an outbox entry only once replicas hold it: after its
// reads of a master's outboxes it renews the leases it holds there (a write) and WAITs, on
// the same connection, for as many replicas as replicas(addr) says (guard.ReplicasToWait);
// if they do not answer, it publishes nothing from that master this round. Replication is in
// order, so a replica that has the lease's renewal has every entry read before it: a master
// paused or cut off past the node timeout, whose replica was promoted, has entries no
// replica will hold, and they never reach Kafka (they vanish with its writes when it
// rejoins). Call it before Run.
func (s *Sweeper) FenceWith(replicas func(addr string) (int, time.Duration)) { s.fence = replicas }

// FullSweepEvery is how many sweeps one pass over every open sale takes: each sweep reads the
// pending buckets (salescan.Pending) and this share of the set of sales (SSCAN), so that the
// pass costs Redis and the leader the same each second rather than all at once.
const FullSweepEvery = 30

// Run sweeps each sweep interval until ctx ends, while this proxy leads the sweeping of its
// route's sales (salescan.Lead: one proxy per Kafka topic, whatever the number of sidecars;
// another takes over within outbox.lease_ttl of the leader's stopping). The others only try
// the lease, a command each interval. A sweep reads the buckets the proxies marked pending,
// and the next 1/FullSweepEvery of the set of sales (sweepChunk). An entry's age
// is taken by Redis's clock, which gave the entry its ID, so a proxy whose own clock is off
// neither republishes entries early nor leaves them late.
func (s *Sweeper) Run(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.SweepInterval)
	defer ticker.Stop()
	lead := salescan.SweepLeadKey(s.tee.Route())
	defer func() { // the next proxy leads at once
		uctx, cancel := context.WithTimeout(context.Background(), s.cfg.LeaseTTL)
		defer cancel()
		_ = salescan.Unlead(uctx, s.rc, lead, s.instance)
	}()
	var pass sweepPass
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		s.tick(ctx, lead, &pass)
	}
}

// sweepPass is where the pass over the set of sales is.
type sweepPass struct {
	cursor uint64 // the set's SSCAN cursor
	chunk  int64  // how many sales a sweep reads of it, set at each pass's start
	inPass int    // sweeps since the pass began: a pass done early waits for FullSweepEvery
}

// tick is one sweep interval: the lead renewed (or tried), then, leading, a sweep of the
// pending buckets and of the pass's next chunk of sales.
func (s *Sweeper) tick(ctx context.Context, lead string, p *sweepPass) {
	if ok, err := salescan.LeadWhileSales(ctx, s.rc, lead, s.instance, s.cfg.LeaseTTL, s.leading.Load()); err != nil || !ok {
		if err != nil && ctx.Err() == nil {
			s.log.Warn("sweep skipped: could not take or renew the sweep lease", zap.Error(err))
		}
		s.leading.Store(false)
		return
	}
	if !s.leading.Swap(true) {
		p.cursor, p.inPass = 0, FullSweepEvery // a new leader begins a pass
	}
	now, err := s.rc.Time(ctx).Result()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("sweep skipped: no time from Redis", zap.Error(err))
		}
		return
	}
	n, err := s.SweepPending(ctx, now)
	p.inPass++
	var cerr error
	if p.cursor != 0 || p.inPass >= FullSweepEvery { // a small set is read at once, and then rests
		if p.cursor == 0 {
			p.inPass = 0
			if card, serr := s.rc.SCard(ctx, sale.SalesKey).Result(); serr == nil {
				p.chunk = max(100, card/FullSweepEvery+1)
			}
		}
		var m int
		m, p.cursor, cerr = s.sweepChunk(ctx, now, p.cursor, p.chunk)
		n += m
	}
	if err = errors.Join(err, cerr); err != nil && ctx.Err() == nil {
		s.log.Warn("sweep failed", zap.Error(err))
	} else if n > 0 {
		s.log.Info("republished outbox entries", zap.Int("entries", n))
	}
}

// Leading says whether this proxy swept in its last interval (it held the sweep lease).
func (s *Sweeper) Leading() bool { return s.leading.Load() }

// sweepChunk sweeps the next count or so sales of the set of sales from cursor (SSCAN), as
// SweepOnce sweeps them all, and returns the cursor to go on from (0: the pass is over).
func (s *Sweeper) sweepChunk(ctx context.Context, now time.Time, cursor uint64, count int64) (int, uint64, error) {
	if !s.tee.Healthy() {
		return 0, cursor, nil
	}
	skus, next, err := s.rc.SScan(ctx, sale.SalesKey, cursor, "", count).Result()
	if err != nil {
		return 0, cursor, err
	}
	n, err := s.sweepSales(ctx, now, skus)
	return n, next, err
}

// SweepOnce is a full sweep: it reads every open sale's buckets through salescan (a call per
// master and salescan.Chunk buckets), sweeps them (sweep), marks pending those with work
// left, and takes the sales that are over and drained out of the set of sales. It returns how
// many entries it handed to the tee. One bucket's error is logged and the others go on.
func (s *Sweeper) SweepOnce(ctx context.Context, now time.Time) (int, error) {
	if !s.tee.Healthy() {
		return 0, nil
	}
	skus, err := s.rc.SMembers(ctx, sale.SalesKey).Result()
	if err != nil {
		return 0, err
	}
	return s.sweepSales(ctx, now, skus)
}

// sweepSales is SweepOnce for the sales skus.
func (s *Sweeper) sweepSales(ctx context.Context, now time.Time, skus []string) (int, error) {
	if len(skus) == 0 {
		return 0, nil
	}
	var errs []error
	fail := func(tag, what string, err error) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", tag, what, err))
	}
	layouts, buckets := s.read(ctx, skus, fail)
	var over []sale.Layout
	var busy []string
	for _, l := range layouts {
		drained := true
		for _, t := range l.Tags {
			b := buckets[sale.Tag(l.SKU, t)]
			drained = drained && b.Err == nil && b.Outbox == 0
			if b.Err == nil && (b.Outbox > 0 || b.Reserved > 0) {
				busy = append(busy, b.Tag)
			}
		}
		if drained && saleOver(buckets[l.SKU], now) {
			over = append(over, l)
		}
	}
	if err := salescan.MarkNow(ctx, s.rc, salescan.PendingKey(s.tee.Route()), busy); err != nil {
		fail("pending", "mark", err)
	}
	total := s.sweep(ctx, now, layouts, buckets, nil, fail)
	s.retire(ctx, over, fail)
	return total, errors.Join(errs...)
}

// SweepPending sweeps the buckets marked pending (salescan.Pending), and takes out of the
// pending set those with nothing left to do. It returns how many entries it handed to the
// tee.
func (s *Sweeper) SweepPending(ctx context.Context, now time.Time) (int, error) {
	if !s.tee.Healthy() {
		return 0, nil
	}
	route := s.tee.Route()
	tags, err := salescan.List(ctx, s.rc, salescan.PendingKey(route))
	if err != nil || len(tags) == 0 {
		return 0, err
	}
	var errs []error
	fail := func(tag, what string, err error) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", tag, what, err))
	}
	only := make(map[string]bool, len(tags))
	var skus []string
	for _, t := range tags {
		only[t] = true
		sku, _ := sale.SplitTag(t)
		skus = append(skus, sku)
	}
	slices.Sort(skus)
	layouts, buckets := s.read(ctx, slices.Compact(skus), fail)
	total := s.sweep(ctx, now, layouts, buckets, only, fail)
	mine := map[string]bool{} // the buckets of the sales on this proxy's route
	for _, l := range layouts {
		for _, t := range l.Tags {
			mine[sale.Tag(l.SKU, t)] = true
		}
	}
	var idle []string
	for _, t := range tags {
		b := buckets[t]
		if !mine[t] || b.Err == nil && b.Outbox == 0 && b.Reserved == 0 {
			idle = append(idle, t) // nothing to do, or nothing for this route's sweeper
		}
	}
	if err := salescan.Unmark(ctx, s.rc, salescan.PendingKey(route), idle, salescan.Quiet); err != nil {
		fail("pending", "unmark", err)
	}
	return total, errors.Join(errs...)
}

// read reads skus' bucket 0 through salescan, keeps those on this proxy's route (onRoute),
// then reads their other stock buckets: the layouts, and every bucket read by tag.
func (s *Sweeper) read(ctx context.Context, skus []string, fail func(string, string, error)) ([]sale.Layout, map[string]salescan.Bucket) {
	s.scanned.Add(int64(len(skus)))
	layouts, buckets := s.onRoute(salescan.Scan(ctx, s.rc, salescan.ForSweep, skus), fail)
	var extra []string
	for _, l := range layouts {
		for _, t := range l.Tags[1:] {
			extra = append(extra, sale.Tag(l.SKU, t))
		}
	}
	for _, b := range salescan.Scan(ctx, s.rc, salescan.ForSweep, extra) {
		buckets[b.Tag] = b
	}
	return layouts, buckets
}

// onRoute keeps the sales among scanned (each sale's bucket 0, as salescan read it) whose
// route is this proxy's (or that have none), with their layouts (their stock buckets, from the
// meta), and returns every bucket read by tag: a proxy on another topic must not send a
// sale's orders where no sink of the sale reads them, nor take the lease from a proxy that
// would send them right. A sale with no meta is kept with one bucket, so that it may leave
// the set. It logs each one left alone at Info, at most every 10 minutes: deployments on
// other topics may share the cluster, and a proxy that would sell such a sale says so loudly
// (DRIFT) at its buys.
func (s *Sweeper) onRoute(scanned []salescan.Bucket, fail func(string, string, error)) ([]sale.Layout, map[string]salescan.Bucket) {
	buckets := make(map[string]salescan.Bucket, len(scanned))
	mine := s.tee.Route()
	var out []sale.Layout
	for _, b := range scanned {
		buckets[b.Tag] = b
		sku := b.Tag
		if b.Err != nil {
			fail(sku, "scan", b.Err)
			continue
		}
		l, err := salescan.Layout(b)
		if err != nil {
			fail(sku, "buckets", err)
			continue
		}
		if sale.RouteAccepts(b.Route, mine) {
			out = append(out, l)
			continue
		}
		s.drifted.Add(1)
		if s.driftLogged == nil || len(s.driftLogged) >= 4096 {
			s.driftLogged = map[string]time.Time{}
		}
		if time.Since(s.driftLogged[sku]) >= 10*time.Minute {
			s.driftLogged[sku] = time.Now()
			s.log.Info("not sweeping a sale whose orders go elsewhere than this proxy's: its own proxies will",
				zap.String("sku", sku), zap.String("sale_route", b.Route), zap.String("proxy_route", mine),
				zap.String("difference", sale.RouteDiff(b.Route, mine)))
		}
	}
	return out, buckets
}
