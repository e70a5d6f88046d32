package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/sale"
)

// Sweeper republishes outbox entries that the tee did not get acknowledged: orders of a proxy
// killed between the script and Kafka, or sold while Kafka was down. Every proxy runs one;
// for each SKU they take turns through a short lease in Redis, so that many sidecars do not
// all republish the same entries. A duplicate still reaches Kafka now and then: the sink
// stores each order once.
//
// It finds the outboxes through the set of sales (sale.SalesKey), never by scanning the
// keyspace; a sale leaves the set once it is over and its outbox is empty. Build it with
// NewSweeper; Run blocks until ctx ends.
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
	driftLogged                           map[string]time.Time // sku -> when its drift was last logged
}

// Settler settles a split sale's old reservations in one bucket (guard.Guard does): buyers
// reserved at home while a proxy asked a donor bucket for their units, and left so by a proxy
// that stopped between the steps.
type Settler interface {
	SettleReservations(ctx context.Context, l sale.Layout, bucket int, now time.Time) error
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
		{Name: "outbox_drifted", Value: st.Drifted, Metric: &guard.Metric{Name: "seckill_proxy_outbox_drifted_total", Help: "Sweeps of a sale left alone because the sale's orders go to another topic than this proxy's."}},
	}
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

// Run sweeps every outbox each sweep interval until ctx ends. An entry's age is taken by
// Redis's clock, which gave the entry its ID, so a proxy whose own clock is off neither
// republishes entries early nor leaves them late.
func (s *Sweeper) Run(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.SweepInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		now, err := s.rc.Time(ctx).Result()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("sweep skipped: no time from Redis", zap.Error(err))
			}
			continue
		}
		if n, err := s.SweepOnce(ctx, now); err != nil && ctx.Err() == nil {
			s.log.Warn("sweep failed", zap.Error(err))
		} else if n > 0 {
			s.log.Info("republished outbox entries", zap.Int("entries", n))
		}
	}
}

// SweepOnce republishes, for each bucket whose lease it wins, the outbox entries older than
// the sweep age at now; moves an entry that cannot be read to the bucket's dead-letter
// stream; settles the bucket's old reservations (a donor step a proxy did not finish, with
// Options' Settler); and takes a sale that is over and drained out of the set. A sale of one
// bucket is its SKU's keys; a split sale's buckets are each swept as one. It returns how many
// entries it handed to the tee. The round trips are pipelined (one per node for the leases,
// one for the outboxes); one bucket's error is logged and the others go on.
func (s *Sweeper) SweepOnce(ctx context.Context, now time.Time) (int, error) {
	if !s.tee.Healthy() {
		return 0, nil
	}
	skus, err := s.rc.SMembers(ctx, sale.SalesKey).Result()
	if err != nil {
		return 0, err
	}
	var errs []error
	fail := func(tag, what string, err error) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", tag, what, err))
	}
	layouts := s.onRoute(ctx, skus, fail)
	var tags []string
	for _, l := range layouts {
		for _, t := range l.Tags {
			tags = append(tags, sale.Tag(l.SKU, t))
		}
	}
	pipe := s.rc.Pipeline()
	leases := make([]*redis.BoolCmd, len(tags))
	for i, tag := range tags {
		leases[i] = pipe.SetNX(ctx, sale.KeysFor(tag).SweepLease, s.instance, s.cfg.LeaseTTL)
	}
	_, _ = pipe.Exec(ctx) // each command's error is its bucket's
	won := map[string]bool{}
	var wonTags []string
	for i, l := range leases {
		switch {
		case l.Err() != nil:
			fail(tags[i], "lease", l.Err())
		case l.Val():
			won[tags[i]] = true
			wonTags = append(wonTags, tags[i])
		}
	}
	cutoff := strconv.FormatInt(now.Add(-s.cfg.SweepAge).UnixMilli(), 10)
	ranges, fenced := s.readOutboxes(ctx, wonTags, cutoff, fail)
	total := 0
	idle := map[string]bool{} // won, and nothing old in the outbox: may be over
	for i, tag := range wonTags {
		if ranges[i] == nil {
			continue
		}
		entries, err := ranges[i].Result()
		if err != nil {
			fail(tag, "outbox", err)
			continue
		}
		if len(entries) == 0 {
			idle[tag] = true
		}
		if fenced[i] {
			continue // no replica was seen to hold them: not this round
		}
		for _, e := range entries {
			sold, err := sale.SoldFromEntry(tag, e.ID, e.Values)
			if err != nil {
				s.bury(ctx, tag, e.ID, err, fail)
				continue
			}
			s.tee.Publish(sold, nil)
			s.republished.Add(1)
			total++
		}
	}
	var over []sale.Layout // every bucket won and idle
	for _, l := range layouts {
		all := true
		for i, t := range l.Tags {
			tag := sale.Tag(l.SKU, t)
			if won[tag] && l.K() > 1 && s.settler != nil {
				if err := s.settler.SettleReservations(ctx, l, i, now); err != nil {
					fail(tag, "reservations", err)
				}
			}
			all = all && idle[tag]
		}
		if all {
			over = append(over, l)
		}
	}
	s.retire(ctx, over, fail)
	return total, errors.Join(errs...)
}

// readOutboxes reads the won buckets' outbox entries older than cutoff, in one pipeline per
// master; with a fence (FenceWith), each pipeline ends with the renewal of the leases read
// there and a WAIT, and fenced[i] says bucket i's entries are not to be published: WAIT came
// back short. A bucket whose master is not known has a nil range (its error is failed).
func (s *Sweeper) readOutboxes(ctx context.Context, tags []string, cutoff string, fail func(string, string, error)) ([]*redis.XMessageSliceCmd, []bool) {
	ranges := make([]*redis.XMessageSliceCmd, len(tags))
	fenced := make([]bool, len(tags))
	byMaster := map[string][]int{}
	clients := map[string]*redis.Client{}
	var order []string
	for i, tag := range tags {
		m, err := s.rc.MasterForKey(ctx, sale.KeysFor(tag).Outbox)
		if err != nil {
			fail(tag, "outbox", err)
			continue
		}
		addr := m.Options().Addr
		if _, ok := byMaster[addr]; !ok {
			order = append(order, addr)
			clients[addr] = m
		}
		byMaster[addr] = append(byMaster[addr], i)
	}
	for _, addr := range order {
		want, timeout := 0, time.Duration(0)
		if s.fence != nil {
			want, timeout = s.fence(addr)
		}
		pipe := clients[addr].Pipeline() // one connection: WAIT covers the renewals before it
		for _, i := range byMaster[addr] {
			ranges[i] = pipe.XRangeN(ctx, sale.KeysFor(tags[i]).Outbox, "-", cutoff, int64(s.cfg.SweepBatch))
		}
		var acked *redis.Cmd
		if want > 0 {
			for _, i := range byMaster[addr] {
				pipe.PExpire(ctx, sale.KeysFor(tags[i]).SweepLease, s.cfg.LeaseTTL)
			}
			acked = pipe.Do(ctx, "WAIT", want, timeout.Milliseconds())
		}
		_, _ = pipe.Exec(ctx) // each command's error is its bucket's
		if acked != nil {
			if n, err := acked.Int64(); err != nil || n < int64(want) {
				s.fenced.Add(1)
				for _, i := range byMaster[addr] {
					fenced[i] = true
				}
			}
		}
	}
	return ranges, fenced
}

// onRoute keeps the sales among skus whose route is this proxy's (or that have none), with
// their layouts (their stock buckets, from the meta): a proxy on another topic must not send
// a sale's orders where no sink of the sale reads them, nor take the lease from a proxy that
// would send them right. It logs each one left alone at Info, at most every 10 minutes:
// deployments on other topics may share the cluster, and a proxy that would sell such a sale
// says so loudly (DRIFT) at its buys.
func (s *Sweeper) onRoute(ctx context.Context, skus []string, fail func(string, string, error)) []sale.Layout {
	pipe := s.rc.Pipeline()
	metas := make([]*redis.SliceCmd, len(skus))
	for i, sku := range skus {
		metas[i] = pipe.HMGet(ctx, sale.KeysFor(sku).Meta, "route", "buckets")
	}
	_, _ = pipe.Exec(ctx)
	mine := s.tee.Route()
	var out []sale.Layout
	for i, sku := range skus {
		vals, err := metas[i].Result()
		if err != nil {
			fail(sku, "route", err)
			continue
		}
		r, _ := vals[0].(string)
		b, _ := vals[1].(string)
		tags, err := sale.ParseBuckets(b)
		if err != nil {
			fail(sku, "buckets", err)
			continue
		}
		if sale.RouteAccepts(r, mine) {
			out = append(out, sale.Layout{SKU: sku, Tags: tags})
			continue
		}
		s.drifted.Add(1)
		if s.driftLogged == nil || len(s.driftLogged) >= 4096 {
			s.driftLogged = map[string]time.Time{}
		}
		if time.Since(s.driftLogged[sku]) >= 10*time.Minute {
			s.driftLogged[sku] = time.Now()
			s.log.Info("not sweeping a sale whose orders go elsewhere than this proxy's: its own proxies will",
				zap.String("sku", sku), zap.String("sale_route", r), zap.String("proxy_route", mine),
				zap.String("difference", sale.RouteDiff(r, mine)))
		}
	}
	return out
}

// bury moves an unreadable outbox entry to its bucket's dead-letter stream (bury.lua), once.
func (s *Sweeper) bury(ctx context.Context, tag, id string, cause error, fail func(string, string, error)) {
	k := sale.KeysFor(tag)
	moved, err := buryScript.Run(ctx, s.rc, []string{k.Outbox, k.Dead, k.Meta}, id, cause.Error()).Int()
	if err != nil {
		fail(tag, "dead-letter entry "+id, err)
		return
	}
	if moved == 1 {
		s.buried.Add(1)
		s.log.Warn("unreadable outbox entry moved to the dead letters", zap.String("bucket", tag), zap.String("entry", id),
			zap.String("dead_letters", k.Dead), zap.String("error", cause.Error()))
	}
}

// retire takes the sales of layouts that are over and drained (every bucket, by retire.lua)
// out of the set of sales, so that the sweepers stop visiting them. A release may add to an
// outbox just then, and a WARM may open the sale anew (it adds the sale to the set before and
// again after): so retire.lua asks again after the SREM, and a sale that is no longer over and
// drained goes back in. Whichever comes last, the SREM or WARM's last SADD, the sale is in the
// set once it is open.
func (s *Sweeper) retire(ctx context.Context, layouts []sale.Layout, fail func(string, string, error)) {
	if len(layouts) == 0 {
		return
	}
	pipe := s.rc.Pipeline()
	done := make([][]*redis.Cmd, len(layouts))
	for i, l := range layouts {
		for b := range l.Tags {
			k := l.Keys(b)
			done[i] = append(done[i], retireScript.EvalSha(ctx, pipe, []string{k.Meta, k.Outbox}))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		_ = s.rc.ScriptLoad(ctx, retireLua).Err()
		return // next pass
	}
next:
	for i, l := range layouts {
		for _, c := range done[i] {
			if n, err := c.Int(); err != nil {
				fail(l.SKU, "retire", err)
				continue next
			} else if n != 1 {
				continue next
			}
		}
		if err := s.rc.SRem(ctx, sale.SalesKey, l.SKU).Err(); err != nil {
			fail(l.SKU, "retire", err)
			continue
		}
		for b := range l.Tags {
			k := l.Keys(b)
			if n, err := retireScript.Run(ctx, s.rc, []string{k.Meta, k.Outbox}).Int(); err != nil || n != 1 {
				if err := s.rc.SAdd(ctx, sale.SalesKey, l.SKU).Err(); err != nil {
					s.log.Error("a retired sale is not over and drained any more, and could not be put back in the sales set", zap.String("sku", l.SKU), zap.Error(err))
				}
				continue next
			}
		}
		s.retired.Add(1)
		s.log.Info("sale over and drained: the sweepers stop visiting it", zap.String("sku", l.SKU))
	}
}
