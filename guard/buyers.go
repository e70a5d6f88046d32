package guard

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/guard/admit"
	"seckill-proxy/sale"
)

// probe is what Redis says of a sale now: its state, version, stock and buyer count (summed
// over a split sale's buckets), and its layout; masters is the client of the master each
// bucket was read from, for the reads that follow and for their fence (fence.go).
type probe struct {
	state, version string
	stock, buyers  int64
	layout         sale.Layout
	masters        []*redis.Client
}

func (g *Guard) probe(ctx context.Context, sku string) (probe, error) {
	p := probe{layout: sale.OneBucket(sku)}
	v, err := g.probeBucket(ctx, &p, sale.KeysFor(sku))
	if err != nil {
		return probe{}, err
	}
	p.state, p.version = sale.Field(v, 0), sale.Field(v, 1)
	if tags, err := sale.ParseBuckets(sale.Field(v, 4)); err == nil {
		p.layout.Tags = tags
	}
	for b := 1; b < p.layout.K(); b++ {
		if _, err := g.probeBucket(ctx, &p, p.layout.Keys(b)); err != nil {
			return probe{}, err
		}
	}
	return p, nil
}

// probeBucket runs probe.lua on the master of the bucket of keys, adds its stock and buyers to
// p's, and keeps that master in p.masters.
func (g *Guard) probeBucket(ctx context.Context, p *probe, keys sale.Keys) ([]any, error) {
	m, err := g.rc.MasterForKey(ctx, keys.Meta)
	if err != nil {
		return nil, err
	}
	v, err := probeScript.Run(ctx, m, keys.ScriptKeys()).Slice()
	if err != nil {
		return nil, err
	}
	n, _ := strconv.ParseInt(sale.Field(v, 2), 10, 64)
	b, _ := strconv.ParseInt(sale.Field(v, 3), 10, 64)
	p.stock += n
	p.buyers += b
	p.masters = append(p.masters, m)
	return v, nil
}

// fenced returns nil once replicas hold everything p's masters had written when it was
// called: every read made of them since the probe rests on replicated state (fence.go).
func (g *Guard) fenced(ctx context.Context, p probe) error {
	for b, m := range p.masters {
		if err := g.fence(ctx, m, p.layout.Keys(b).Fence); err != nil {
			return err
		}
	}
	return nil
}

// soldOut flags sku sold out once its buyers are read, so that a buyer who holds an order is
// told DUPLICATE with it rather than SOLDOUT. The read runs in the background, one at a time
// per SKU; until it is done, buys go to Redis, which answers them rightly. A Clear meanwhile
// (a release, a re-warm) keeps the flag from being set.
func (g *Guard) soldOut(sku string) {
	c := g.countersFor(sku)
	if !c.flagging.CompareAndSwap(false, true) {
		return
	}
	gen := g.flags.Gen()
	g.workers.Go(func() {
		defer c.flagging.Store(false)
		ctx, cancel := context.WithTimeout(g.ctx, warmTimeoutFactor*g.opt.Buy.CallTimeout)
		defer cancel()
		b, err := g.readBuyers(ctx, sku, c.buyers.Load())
		if err != nil {
			if ctx.Err() == nil || g.ctx.Err() == nil {
				g.log.Warn("could not read a sold-out sale's buyers; its buys keep going to Redis", zap.String("sku", sku), zap.Error(err))
			}
			return
		}
		if b == nil {
			return // not sold out after all
		}
		c.buyers.Store(b)
		g.flags.SetSoldOut(sku, g.opt.Now(), b, gen)
	})
}

// readBuyers reads sku's buyers if its sale is sold out (nil if it is not), fenced (fence.go):
// an error if no replica is known to hold what was read. While the sale's version and buyer
// count stand, prev still holds, and is returned without reading them again.
func (g *Guard) readBuyers(ctx context.Context, sku string, prev *Buyers) (*Buyers, error) {
	p, err := g.probe(ctx, sku)
	if err != nil {
		return nil, err
	}
	if p.state != sale.StateOpen || p.stock > 0 {
		return nil, nil
	}
	if prev != nil && prev.Version == p.version && prev.Count == p.buyers {
		return prev, g.fenced(ctx, p)
	}
	b := &Buyers{Version: p.version, Count: p.buyers}
	if p.buyers > int64(g.opt.Buy.SoldOutBuyers) {
		g.log.Warn("a sold-out sale has more buyers than buy.sold_out_buyers: its buyers are told SOLDOUT, not DUPLICATE, while the local flag stands",
			zap.String("sku", sku), zap.Int64("buyers", p.buyers), zap.Int("sold_out_buyers", g.opt.Buy.SoldOutBuyers))
		return b, g.fenced(ctx, p)
	}
	b.Orders = make(map[string]string, p.buyers)
	for bucket := range p.layout.Tags {
		key := p.layout.Keys(bucket).Buyers
		var cursor uint64
		for {
			kv, next, err := p.masters[bucket].HScan(ctx, key, cursor, "", 1000).Result()
			if err != nil {
				return nil, err
			}
			for i := 0; i+1 < len(kv); i += 2 {
				if strings.HasPrefix(kv[i+1], "r:") {
					b.Orders[kv[i]] = "" // a reservation, not an order: its buys go to Redis
					continue
				}
				b.Orders[kv[i]] = orderOf(kv[i+1])
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return b, g.fenced(ctx, p)
}

// orderOf is the order id in a buyers hash value: "<id>:<qty>", "released:<id>:<qty>", or
// a reservation's "r:<id>:<qty>".
func orderOf(v string) string {
	v = strings.TrimPrefix(v, "released:")
	v = strings.TrimPrefix(v, "r:")
	id, _, _ := strings.Cut(v, ":")
	return id
}

// clearFlag drops sku's flag and the buyers this proxy knows (a release or re-warm: there
// may be stock again, and a buyer may buy again).
func (g *Guard) clearFlag(sku string) {
	g.flags.Clear(sku)
	g.forgetStock(sku)
	g.noSales.forget(sku)
	if c, ok := g.counters(sku); ok {
		c.known.forget()
	}
}

// knownBuyers are the buyers of an open sale that this proxy sold to or was told hold an
// order, so that their next buys are answered DUPLICATE with no Redis call. They are trusted
// while a script reply of the same sale version came within buy.sold_out_reprobe, the same
// backstop as the sold-out flag's in case a release or re-warm event is missed; a new version
// forgets them. At most buy.sold_out_buyers are kept.
type knownBuyers struct {
	at      atomic.Int64 // Unix ns of the last reply that bore the version out
	mu      sync.Mutex
	version string
	orders  map[uint64]string // admit.Hash(uid) -> order id
}

func (k *knownBuyers) add(uid, orderID, version string, now time.Time, most int) {
	h := admit.Hash(uid)
	k.mu.Lock()
	defer k.mu.Unlock()
	if version != k.version || k.orders == nil {
		k.version, k.orders = version, map[uint64]string{}
	}
	if len(k.orders) < most {
		k.orders[h] = orderID
	}
	k.at.Store(now.UnixNano())
}

// order is the order id of the buyer whose uid has hash h (admit.Hash), if known at now.
func (k *knownBuyers) order(h uint64, now time.Time, ttl time.Duration) (string, bool) {
	at := k.at.Load()
	if at == 0 || now.UnixNano()-at >= int64(ttl) {
		return "", false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	id, ok := k.orders[h]
	return id, ok
}

func (k *knownBuyers) forget() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.version, k.orders = "", nil
	k.at.Store(0)
}
