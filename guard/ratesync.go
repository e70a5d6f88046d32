package guard

import (
	"context"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/guard/admit"
	"seckill-proxy/sale"
)

// Admission's sync: the sales' rates and the deny list kept as Redis has them, by one
// goroutine (syncAdmission), reading only what the buys here need.

// rateActiveFor is how long after this proxy last answered a buy of a sale it keeps reading
// the sale's rate every admission.sync_interval.
const rateActiveFor = 30 * time.Second

// rateSync is what syncAdmission's goroutine knows between its rounds.
type rateSync struct {
	full bool // every sale's rate has been read once since start
}

// syncAdmission keeps the sales' rates and the deny list as Redis has them, until Close.
// Every sale's rate is read once at start (again until that succeeds); from then on, each
// admission.sync_interval, only the rates of the sales whose buys this proxy answered within
// rateActiveFor, and a sale's own at once when an event says it was warmed or limited (or it
// was first bought here after a quiet spell). So an idle proxy reads no rate however many
// sales are open, and a rate change whose event was lost reaches a proxy within a sync
// interval of its next buy of that sale. The deny list is read when its version changes. It
// also gives back lapsed leases. At Close it gives back every token in hand.
func (g *Guard) syncAdmission(ctx context.Context) {
	t := time.NewTicker(g.adm.opt.SyncInterval)
	defer t.Stop()
	var st rateSync
	g.syncOnce(ctx, &st)
	for {
		select {
		case <-ctx.Done():
			g.giveBackAll()
			return
		case <-t.C:
		case <-g.adm.kick:
		}
		g.syncOnce(ctx, &st)
	}
}

// kickSync has the deny list's version read again now.
func (g *Guard) kickSync() {
	select {
	case g.adm.kick <- struct{}{}:
	default:
	}
}

// kickRate has sku's rate read again now.
func (g *Guard) kickRate(sku string) {
	g.staleRates(sku)
	g.kickSync()
}

// staleRates has skus' rates read in the next round.
func (g *Guard) staleRates(skus ...string) {
	g.adm.ratesMu.Lock()
	defer g.adm.ratesMu.Unlock()
	if g.adm.stale == nil {
		g.adm.stale = map[string]bool{}
	}
	for _, sku := range skus {
		if len(g.adm.stale) < maxStaleRates {
			g.adm.stale[sku] = true
		}
	}
}

// maxStaleRates bounds the SKUs waiting for their rate to be read (events of a WARM of many
// sales at once): past it an event's SKU waits for its first buy here.
const maxStaleRates = 100000

func (g *Guard) syncOnce(ctx context.Context, st *rateSync) {
	defer g.adm.syncRounds.Add(1)
	ctx, cancel := context.WithTimeout(ctx, warmTimeoutFactor*g.opt.Buy.CallTimeout)
	defer cancel()
	if err := g.syncRates(ctx, st); err != nil && ctx.Err() == nil {
		g.log.Warn("could not read the sales' rates", zap.Error(err))
	}
	if err := g.syncDeny(ctx); err != nil && ctx.Err() == nil {
		g.log.Warn("could not read the deny list", zap.Error(err))
	}
	now := g.opt.Now()
	for sku, l := range *g.adm.rates.Load() {
		if n := l.Expire(now); n > 0 {
			g.requestLease(sku, l, admit.LeaseCall{GiveBack: n}, now)
		}
	}
}

// syncRates reads the rates this round needs (see syncAdmission): every sale's until that has
// been done once, then the active and the kicked ones. A sale whose meta is gone (over and
// drained, or its keys deleted) loses its rate here.
func (g *Guard) syncRates(ctx context.Context, st *rateSync) error {
	now := g.opt.Now()
	var skus []string
	if !st.full {
		all, err := g.lc.SMembers(ctx, sale.SalesKey).Result()
		if err != nil {
			return err
		}
		skus = all
	} else {
		skus = g.activeRates(now)
	}
	g.adm.ratesMu.Lock()
	for sku := range g.adm.stale {
		skus = append(skus, sku)
	}
	g.adm.stale = nil
	g.adm.ratesMu.Unlock()
	slices.Sort(skus)
	skus = slices.Compact(skus)
	if err := g.readRates(ctx, skus); err != nil {
		if st.full { // read next round (the first read is whole again)
			g.staleRates(skus...)
		}
		return err
	}
	st.full = true
	return nil
}

// activeRates are the SKUs this proxy answered buys of within rateActiveFor (recentSales).
func (g *Guard) activeRates(now time.Time) []string {
	return g.recentSince(now.Add(-rateActiveFor), now.Add(-shownFor))
}

// readRates reads skus' rates, bursts and per-user limits in one pipeline, and puts them in
// force.
func (g *Guard) readRates(ctx context.Context, skus []string) error {
	if len(skus) == 0 {
		return nil
	}
	g.adm.rateReads.Add(int64(len(skus)))
	cmds := make([]*redis.SliceCmd, len(skus))
	_, err := g.lc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sku := range skus {
			cmds[i] = p.HMGet(ctx, sale.KeysFor(sku).Meta, "rate", "burst", "limit", "version")
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, sku := range skus {
		v := cmds[i].Val()
		rate, _ := strconv.ParseInt(str(v, 0), 10, 64)
		burst, _ := strconv.ParseInt(str(v, 1), 10, 64)
		g.setRate(sku, rate, burst)
		limit, _ := strconv.ParseInt(str(v, 2), 10, 64)
		g.learnLimit(sku, str(v, 3), limit)
	}
	return nil
}

func str(v []any, i int) string {
	if i < len(v) {
		if s, ok := v[i].(string); ok {
			return s
		}
	}
	return ""
}

// syncDeny reads the deny list when its version has changed.
func (g *Guard) syncDeny(ctx context.Context) error {
	ver, err := g.lc.Get(ctx, sale.DenyVersionKey).Result()
	if err == redis.Nil {
		ver, err = "", nil
	}
	if err != nil || ver == g.adm.denyVer {
		return err // an entry that lapses needs no read: Denied checks the expiry
	}
	now := g.opt.Now().UnixMilli()
	zs, err := g.lc.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: sale.DenyKey, ByScore: true,
		Start: "(" + strconv.FormatInt(now, 10), Stop: "+inf"}).Result()
	if err != nil {
		return err
	}
	m := make(map[string]int64, len(zs))
	for _, z := range zs {
		uid, _ := z.Member.(string)
		if math.IsInf(z.Score, 1) {
			m[uid] = 0
		} else {
			m[uid] = int64(z.Score)
		}
	}
	g.adm.deny.Set(m)
	g.adm.denyVer = ver
	return nil
}
