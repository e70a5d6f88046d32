package outbox

// The sweeper's work on one stock bucket: its lease, its old entries read (fenced by WAIT)
// and published, an unreadable entry buried, its reservations settled, a sale over and
// drained retired.

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/internal/salescan"
	"seckill-proxy/sale"
)

// sweep republishes, for each bucket of layouts (those in only, if only is not nil) with
// entries older than the sweep age at now whose lease it wins, those entries; moves an entry
// that cannot be read to the bucket's dead-letter stream; and settles a split sale's old
// reservations (a donor step a proxy did not finish, with the Settler). Only a bucket with
// work costs a lease and a read of its own. It returns how many entries it handed to the tee.
func (s *Sweeper) sweep(ctx context.Context, now time.Time, layouts []sale.Layout, buckets map[string]salescan.Bucket, only map[string]bool, fail func(string, string, error)) int {
	cutoff := now.Add(-s.cfg.SweepAge).UnixMilli()
	wonTags := s.takeLeases(ctx, s.busyBuckets(layouts, buckets, only, cutoff, fail), fail)
	ranges, fenced := s.readOutboxes(ctx, wonTags, strconv.FormatInt(cutoff, 10), fail)
	total := 0
	won := make(map[string]bool, len(wonTags))
	for i, tag := range wonTags {
		won[tag] = true
		if ranges[i] == nil {
			continue
		}
		entries, err := ranges[i].Result()
		if err != nil {
			fail(tag, "outbox", err)
			continue
		}
		if fenced[i] {
			continue // no replica was seen to hold them: not this round
		}
		total += s.republish(ctx, tag, entries, fail)
	}
	if s.settler != nil {
		s.settle(ctx, now, layouts, buckets, won, fail)
	}
	return total
}

// busyBuckets are the buckets of layouts (those in only, if only is not nil) with entries
// older than cutoff, or reservations to settle.
func (s *Sweeper) busyBuckets(layouts []sale.Layout, buckets map[string]salescan.Bucket, only map[string]bool, cutoff int64, fail func(string, string, error)) []string {
	var busy []string
	for _, l := range layouts {
		for _, t := range l.Tags {
			tag := sale.Tag(l.SKU, t)
			b := buckets[tag]
			if only != nil && !only[tag] {
				continue
			}
			if b.Err != nil {
				fail(tag, "scan", b.Err)
				continue
			}
			if b.Outbox > 0 && b.OldestMs <= cutoff || l.K() > 1 && s.settler != nil && b.Reserved > 0 {
				busy = append(busy, tag)
			}
		}
	}
	return busy
}

// republish hands bucket tag's entries to the tee, and buries one that cannot be read.
func (s *Sweeper) republish(ctx context.Context, tag string, entries []redis.XMessage, fail func(string, string, error)) int {
	n := 0
	for _, e := range entries {
		sold, err := sale.SoldFromEntry(tag, e.ID, e.Values)
		if err != nil {
			s.bury(ctx, tag, e.ID, err, fail)
			continue
		}
		s.tee.Publish(sold, nil)
		s.republished.Add(1)
		n++
	}
	return n
}

// settle settles the old reservations of a split sale's buckets whose lease this sweep won.
func (s *Sweeper) settle(ctx context.Context, now time.Time, layouts []sale.Layout, buckets map[string]salescan.Bucket, won map[string]bool, fail func(string, string, error)) {
	for _, l := range layouts {
		for i, t := range l.Tags {
			tag := sale.Tag(l.SKU, t)
			if won[tag] && l.K() > 1 && buckets[tag].Reserved > 0 {
				if err := s.settler.SettleReservations(ctx, l, i, now); err != nil {
					fail(tag, "reservations", err)
				}
			}
		}
	}
}

// saleOver says whether a sale whose bucket 0 the scan read as b may be over at now (Redis's
// clock): closed, past its end, or without a meta. retire.lua decides, on Redis's clock too;
// this only spares it the open sales.
func saleOver(b salescan.Bucket, now time.Time) bool {
	if b.State == "" || b.State == sale.StateClosed {
		return true
	}
	end, err := strconv.ParseInt(b.End, 10, 64)
	return err == nil && end > 0 && end <= now.UnixMilli()
}

// takeLeases takes the sweep lease of each of tags (one pipeline), and returns those it won.
func (s *Sweeper) takeLeases(ctx context.Context, tags []string, fail func(string, string, error)) []string {
	if len(tags) == 0 {
		return nil
	}
	pipe := s.rc.Pipeline()
	leases := make([]*redis.BoolCmd, len(tags))
	for i, tag := range tags {
		leases[i] = pipe.SetNX(ctx, sale.KeysFor(tag).SweepLease, s.instance, s.cfg.LeaseTTL)
	}
	_, _ = pipe.Exec(ctx) // each command's error is its bucket's
	var won []string
	for i, l := range leases {
		switch {
		case l.Err() != nil:
			fail(tags[i], "lease", l.Err())
		case l.Val():
			won = append(won, tags[i])
		}
	}
	return won
}

// readOutboxes reads the won buckets' outbox entries older than cutoff, in one pipeline per
// master; with a fence (FenceWith), each pipeline ends with the renewal of the leases read
// there and a WAIT, and fenced[i] says bucket i's entries are not to be published: WAIT came
// back short. A bucket whose master is not known has a nil range (its error is failed).
func (s *Sweeper) readOutboxes(ctx context.Context, tags []string, cutoff string, fail func(string, string, error)) ([]*redis.XMessageSliceCmd, []bool) {
	ranges := make([]*redis.XMessageSliceCmd, len(tags))
	fenced := make([]bool, len(tags))
	groups, errs := salescan.ByMaster(ctx, s.rc, tags)
	for i, err := range errs {
		fail(tags[i], "outbox", err)
	}
	for _, g := range groups {
		want, timeout := 0, time.Duration(0)
		if s.fence != nil {
			want, timeout = s.fence(g.Client.Options().Addr)
		}
		pipe := g.Client.Pipeline() // one connection: WAIT covers the renewals before it
		for _, i := range g.Idx {
			ranges[i] = pipe.XRangeN(ctx, sale.KeysFor(tags[i]).Outbox, "-", cutoff, int64(s.cfg.SweepBatch))
		}
		var acked *redis.Cmd
		if want > 0 {
			for _, i := range g.Idx {
				pipe.PExpire(ctx, sale.KeysFor(tags[i]).SweepLease, s.cfg.LeaseTTL)
			}
			acked = pipe.Do(ctx, "WAIT", want, timeout.Milliseconds())
		}
		_, _ = pipe.Exec(ctx) // each command's error is its bucket's
		if acked != nil {
			if n, err := acked.Int64(); err != nil || n < int64(want) {
				s.fenced.Add(1)
				for _, i := range g.Idx {
					fenced[i] = true
				}
			}
		}
	}
	return ranges, fenced
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
		if s.settler != nil {
			s.settler.Retired(l.SKU)
		}
		s.log.Info("sale over and drained: the sweepers stop visiting it", zap.String("sku", l.SKU))
	}
}
