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

	buried, retired, republished, drifted atomic.Int64
	driftLogged                           map[string]time.Time // sku -> when its drift was last logged
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
		{Name: "outbox_drifted", Value: st.Drifted, Metric: &guard.Metric{Name: "seckill_proxy_outbox_drifted_total", Help: "Sweeps of a sale left alone because the sale's orders go to another topic than this proxy's."}},
	}
}

// NewSweeper returns a sweeper that republishes through tee.
func NewSweeper(rc *redis.ClusterClient, tee *Tee, cfg conf.Outbox, instance string, log *zap.Logger) *Sweeper {
	return &Sweeper{rc: rc, tee: tee, cfg: cfg, instance: instance, log: log.Named("sweeper")}
}

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

// SweepOnce republishes, for each SKU whose lease it wins, the outbox entries older than the
// sweep age at now; moves an entry that cannot be read to the SKU's dead-letter stream; and
// takes a sale that is over and drained out of the set. It returns how many entries it
// handed to the tee. The round trips are pipelined (one per node for the leases, one for the
// outboxes); one SKU's error is logged and the others go on.
func (s *Sweeper) SweepOnce(ctx context.Context, now time.Time) (int, error) {
	if !s.tee.Healthy() {
		return 0, nil
	}
	skus, err := s.rc.SMembers(ctx, sale.SalesKey).Result()
	if err != nil {
		return 0, err
	}
	var errs []error
	fail := func(sku, what string, err error) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", sku, what, err))
	}
	skus = s.onRoute(ctx, skus, fail)
	pipe := s.rc.Pipeline()
	leases := make([]*redis.BoolCmd, len(skus))
	for i, sku := range skus {
		leases[i] = pipe.SetNX(ctx, sale.KeysFor(sku).SweepLease, s.instance, s.cfg.LeaseTTL)
	}
	_, _ = pipe.Exec(ctx) // each command's error is its SKU's
	var won []string
	for i, l := range leases {
		switch {
		case l.Err() != nil:
			fail(skus[i], "lease", l.Err())
		case l.Val():
			won = append(won, skus[i])
		}
	}
	cutoff := strconv.FormatInt(now.Add(-s.cfg.SweepAge).UnixMilli(), 10)
	pipe = s.rc.Pipeline()
	ranges := make([]*redis.XMessageSliceCmd, len(won))
	for i, sku := range won {
		ranges[i] = pipe.XRangeN(ctx, sale.KeysFor(sku).Outbox, "-", cutoff, int64(s.cfg.SweepBatch))
	}
	_, _ = pipe.Exec(ctx)
	total := 0
	var idle []string // won, and nothing old in the outbox: may be over
	for i, sku := range won {
		entries, err := ranges[i].Result()
		if err != nil {
			fail(sku, "outbox", err)
			continue
		}
		if len(entries) == 0 {
			idle = append(idle, sku)
		}
		for _, e := range entries {
			sold, err := sale.SoldFromEntry(sku, e.ID, e.Values)
			if err != nil {
				s.bury(ctx, sku, e.ID, err, fail)
				continue
			}
			s.tee.Publish(sold, nil)
			s.republished.Add(1)
			total++
		}
	}
	s.retire(ctx, idle, fail)
	return total, errors.Join(errs...)
}

// onRoute keeps the sales among skus whose route is this proxy's (or that have none): a
// proxy on another topic must not send a sale's orders where no sink of the sale reads them,
// nor take the lease from a proxy that would send them right. It logs each one left alone at
// Info, at most every 10 minutes: deployments on other topics may share the cluster, and a
// proxy that would sell such a sale says so loudly (DRIFT) at its buys.
func (s *Sweeper) onRoute(ctx context.Context, skus []string, fail func(string, string, error)) []string {
	pipe := s.rc.Pipeline()
	routes := make([]*redis.StringCmd, len(skus))
	for i, sku := range skus {
		routes[i] = pipe.HGet(ctx, sale.KeysFor(sku).Meta, "route")
	}
	_, _ = pipe.Exec(ctx)
	mine := s.tee.Route()
	out := skus[:0]
	for i, sku := range skus {
		r, err := routes[i].Result()
		switch {
		case errors.Is(err, redis.Nil), err == nil && (r == "" || r == mine):
			out = append(out, sku)
		case err != nil:
			fail(sku, "route", err)
		default:
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
	}
	return out
}

// bury moves an unreadable outbox entry to the SKU's dead-letter stream (bury.lua), once.
func (s *Sweeper) bury(ctx context.Context, sku, id string, cause error, fail func(string, string, error)) {
	k := sale.KeysFor(sku)
	moved, err := buryScript.Run(ctx, s.rc, []string{k.Outbox, k.Dead, k.Meta}, id, cause.Error()).Int()
	if err != nil {
		fail(sku, "dead-letter entry "+id, err)
		return
	}
	if moved == 1 {
		s.buried.Add(1)
		s.log.Warn("unreadable outbox entry moved to the dead letters", zap.String("sku", sku), zap.String("entry", id),
			zap.String("dead_letters", k.Dead), zap.String("error", cause.Error()))
	}
}

// retire takes the sales among skus that are over and drained out of the set of sales
// (retire.lua), so that the sweepers stop visiting them. A release may add to an outbox just
// then: the outbox is read again after, and a sale with anything in it goes back in.
func (s *Sweeper) retire(ctx context.Context, skus []string, fail func(string, string, error)) {
	if len(skus) == 0 {
		return
	}
	pipe := s.rc.Pipeline()
	done := make([]*redis.Cmd, len(skus))
	for i, sku := range skus {
		k := sale.KeysFor(sku)
		done[i] = retireScript.EvalSha(ctx, pipe, []string{k.Meta, k.Outbox})
	}
	if _, err := pipe.Exec(ctx); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		_ = s.rc.ScriptLoad(ctx, retireLua).Err()
		return // next pass
	}
	for i, sku := range skus {
		if n, err := done[i].Int(); err != nil {
			fail(sku, "retire", err)
			continue
		} else if n != 1 {
			continue
		}
		if err := s.rc.SRem(ctx, sale.SalesKey, sku).Err(); err != nil {
			fail(sku, "retire", err)
			continue
		}
		if n, err := s.rc.XLen(ctx, sale.KeysFor(sku).Outbox).Result(); err != nil || n > 0 {
			if err := s.rc.SAdd(ctx, sale.SalesKey, sku).Err(); err != nil {
				s.log.Error("a retired sale's outbox is not empty, and could not be put back in the sales set", zap.String("sku", sku), zap.Error(err))
			}
			continue
		}
		s.retired.Add(1)
		s.log.Info("sale over and drained: the sweepers stop visiting it", zap.String("sku", sku))
	}
}
