package sink

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
)

// Sweeper republishes outbox entries that the tee did not get acknowledged: orders of a proxy
// killed between the script and Kafka, or sold while Kafka was down. Every proxy runs one;
// for each SKU they take turns through a short lease in Redis, so that many sidecars do not
// all republish the same entries. A duplicate still reaches Kafka now and then: the sink
// stores each order once.
//
// It finds the outboxes through the set of warmed sales (guard.SalesKey), never by scanning
// the keyspace. Build it with NewSweeper; Run blocks until ctx ends.
type Sweeper struct {
	rc       *redis.ClusterClient
	tee      *Tee
	cfg      conf.Outbox
	instance string
	log      *zap.Logger
}

// NewSweeper returns a sweeper that republishes through tee.
func NewSweeper(rc *redis.ClusterClient, tee *Tee, cfg conf.Outbox, instance string, log *zap.Logger) *Sweeper {
	return &Sweeper{rc: rc, tee: tee, cfg: cfg, instance: instance, log: log.Named("sweeper")}
}

// Run sweeps every outbox each sweep interval until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.SweepInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if n, err := s.SweepOnce(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("sweep failed", zap.Error(err))
		} else if n > 0 {
			s.log.Info("republished outbox entries", zap.Int("entries", n))
		}
	}
}

// SweepOnce republishes, for each SKU whose lease it wins, the outbox entries older than the
// sweep age at now. It returns how many it handed to the tee.
func (s *Sweeper) SweepOnce(ctx context.Context, now time.Time) (int, error) {
	if !s.tee.Healthy() {
		return 0, nil
	}
	skus, err := s.rc.SMembers(ctx, guard.SalesKey).Result()
	if err != nil {
		return 0, err
	}
	cutoff := strconv.FormatInt(now.Add(-s.cfg.SweepAge).UnixMilli(), 10)
	total := 0
	for _, sku := range skus {
		keys := guard.KeysFor(sku)
		won, err := s.rc.SetNX(ctx, keys.SweepLease, s.instance, s.cfg.LeaseTTL).Result()
		if err != nil {
			return total, err
		}
		if !won {
			continue
		}
		entries, err := s.rc.XRangeN(ctx, keys.Outbox, "-", cutoff, int64(s.cfg.SweepBatch)).Result()
		if err != nil {
			return total, err
		}
		for _, e := range entries {
			sold, err := soldFromEntry(sku, e)
			if err != nil {
				s.log.Error("unreadable outbox entry left in place", zap.String("sku", sku), zap.String("entry", e.ID), zap.Error(err))
				continue
			}
			s.tee.Publish(sold, nil)
			total++
		}
	}
	return total, nil
}

// soldFromEntry reads an outbox entry as buy.lua wrote it.
func soldFromEntry(sku string, e redis.XMessage) (guard.Sold, error) {
	str := func(k string) string { v, _ := e.Values[k].(string); return v }
	num := func(k string) (int64, error) { return strconv.ParseInt(str(k), 10, 64) }
	version, err1 := num("version")
	qty, err2 := num("qty")
	ts, err3 := num("ts")
	kind := str("type")
	if kind == "" {
		kind = guard.KindOrder
	}
	s := guard.Sold{Kind: kind, OrderID: str("order"), SKU: sku, UID: str("uid"), Qty: qty, Version: version, EntryID: e.ID, TS: ts, By: str("by")}
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return s, err
		}
	}
	if s.OrderID == "" || s.UID == "" || strings.ContainsAny(s.UID, " \r\n") {
		return s, ErrMalformed
	}
	return s, nil
}
