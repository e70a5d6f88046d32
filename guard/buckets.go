package guard

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/sale"
)

// Stock buckets: a hot sale split over k buckets, each under a hash tag of its own
// (sale.Layout), so that its buys spread over k masters. A buyer's home bucket (sale.Home)
// holds their duplicate check and their order; when it has too few units, buy.lua reserves
// the buyer there and answers EMPTY, and Donate asks the other buckets for the units, one
// atomic step each (donate.lua), then confirms or drops the reservation (reserved.lua). A
// proxy that stops between the steps leaves a reservation, which the sweeper settles from
// Redis alone (SettleReservations). docs/ARCHITECTURE.md has the design and its failure
// cases.

// saleLayout is a split sale's layout as this proxy knows it, for one sale version.
type saleLayout struct {
	version string
	l       sale.Layout
	keys    [][]string // each bucket's script keys
	tags    []string   // each bucket's hash tag
	marked  []atomic.Int64
	// stock is each bucket's stock as the last reply from it said: the donors are asked
	// richest first.
	stock []atomic.Int64
}

// donorsMayHave says whether a bucket other than home may still have units, as far as the
// last replies said: when none may, a buyer their home cannot serve is told SOLDOUT at once,
// with no reservation and no donor asked. A release or re-warm resets what is known
// (forgetStock), as it clears the sold-out flag.
func (sl *saleLayout) donorsMayHave(home int) bool {
	for i := range sl.stock {
		if i != home && sl.stock[i].Load() > 0 {
			return true
		}
	}
	return false
}

// forgetStock makes every bucket of sku's known layout worth asking again.
func (g *Guard) forgetStock(sku string) {
	if v, ok := g.layouts.Load(sku); ok {
		for i := range v.(*saleLayout).stock {
			v.(*saleLayout).stock[i].Store(1)
		}
	}
}

// learnLayout records that sku's sale of version has the buckets buckets (the meta's field;
// "" or one bucket: not split) and returns it (nil when not split, or unreadable).
func (g *Guard) learnLayout(sku, version, buckets string) *saleLayout {
	tags, err := sale.ParseBuckets(buckets)
	if err != nil || len(tags) < 2 {
		g.layouts.Delete(sku)
		return nil
	}
	if cur := g.layoutAt(sku, version); cur != nil && slices.Equal(cur.l.Tags, tags) {
		return cur
	}
	sl := &saleLayout{version: version, l: sale.Layout{SKU: sku, Tags: tags}, stock: make([]atomic.Int64, len(tags)), marked: make([]atomic.Int64, len(tags))}
	for i := range tags {
		sl.keys = append(sl.keys, sl.l.Keys(i).ScriptKeys())
		sl.tags = append(sl.tags, sale.Tag(sku, tags[i]))
		sl.stock[i].Store(1) // unknown: worth asking
	}
	g.layouts.Store(sku, sl)
	return sl
}

// layoutAt is sku's split layout for version, if this proxy knows it (nil: one bucket, or
// unknown).
func (g *Guard) layoutAt(sku, version string) *saleLayout {
	if v, ok := g.layouts.Load(sku); ok {
		if sl := v.(*saleLayout); sl.version == version && version != "" {
			return sl
		}
	}
	return nil
}

// placeAttempt points a at its buyer's home bucket in the layout of its version (bucket 0,
// the sale's own keys, when the sale is not split or this proxy does not know it yet: the
// script then answers STALE with the layout).
func (g *Guard) placeAttempt(a *Attempt) {
	a.lay, a.bucket = nil, 0
	if sl := g.layoutAt(a.req.SKU, a.version); sl != nil {
		a.lay = sl
		a.bucket = sl.l.HomeIndex(a.req.UID)
		a.keys = sl.keys[a.bucket]
		a.tag, a.marked = sl.tags[a.bucket], &sl.marked[a.bucket]
		return
	}
	if c, ok := g.counters(a.req.SKU); ok {
		a.keys, a.tag, a.marked = c.keys, c.tag, &c.marked
	} else {
		a.keys, a.tag, a.marked = sale.KeysFor(a.req.SKU).ScriptKeys(), sale.Tag(a.req.SKU, 0), nil
	}
}

// LayoutOf reads sku's layout from its meta (one bucket for a sale warmed before buckets,
// or never warmed).
func (g *Guard) LayoutOf(ctx context.Context, sku string) (sale.Layout, error) {
	b, err := g.rc.HGet(ctx, sale.KeysFor(sku).Meta, "buckets").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return sale.Layout{}, unavailable(err)
	}
	tags, err := sale.ParseBuckets(b)
	if err != nil {
		return sale.Layout{}, unavailable(fmt.Errorf("sale %s: %w", sku, err))
	}
	return sale.Layout{SKU: sku, Tags: tags}, nil
}

// homeKeys are the keys of uid's home bucket in sku's sale. cached: trust the layout this
// proxy knows for the sale version it knows (a proxy that knows a version learned the
// buckets with it); else, and for the admin commands, the meta is read.
func (g *Guard) homeKeys(ctx context.Context, sku, uid string, cached bool) (sale.Keys, error) {
	if cached {
		v, _ := g.versions.Load(sku)
		if ver, _ := v.(string); ver != "" {
			if sl := g.layoutAt(sku, ver); sl != nil {
				return sl.l.Keys(sl.l.HomeIndex(uid)), nil
			}
			return sale.KeysFor(sku), nil
		}
	}
	l, err := g.LayoutOf(ctx, sku)
	if err != nil {
		return sale.Keys{}, err
	}
	return l.Keys(l.HomeIndex(uid)), nil
}

// maxTagSearch bounds the tag numbers WARM tries when it looks for a master no bucket has.
const maxTagSearch = 2000

// chooseTags picks k tag numbers for sku's buckets: 0 first, then for each further bucket
// the smallest unused number whose slot lies on a master no bucket has yet, while there are
// such masters (past that, more buckets than masters, the masters are used again, each as few
// times as can be), and whose Kafka key (sale.Tag) falls on a partition no bucket has yet, by
// the producer's hash partitioner and Options.Partitions, in the same way. The masters come
// first: past maxTagSearch/2 numbers the partition is let go, past maxTagSearch the master.
func (g *Guard) chooseTags(ctx context.Context, sku string, k int) ([]int, error) {
	if k == 1 {
		return []int{0}, nil
	}
	masterOf := func(t int) (string, error) {
		m, err := g.rc.MasterForKey(ctx, sale.BucketKeys(sku, t).Stock)
		if err != nil {
			return "", unavailable(err)
		}
		return m.Options().Addr, nil
	}
	var mu sync.Mutex // ForEachMaster calls on a goroutine per master
	var masters []string
	if err := g.rc.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, m.Options().Addr)
		return nil
	}); err != nil {
		return nil, unavailable(err)
	}
	uses := map[string]int{}
	parts := make([]int, g.partitions())
	partOf := func(t int) int { return kafkaPartition(sale.Tag(sku, t), len(parts)) }
	m0, err := masterOf(0)
	if err != nil {
		return nil, err
	}
	uses[m0]++
	parts[partOf(0)]++
	tags := []int{0}
	for t := 1; len(tags) < k && t <= sale.MaxTag; t++ {
		m, err := masterOf(t)
		if err != nil {
			return nil, err
		}
		least := uses[m]
		for _, x := range masters {
			least = min(least, uses[x])
		}
		p := partOf(t)
		partOK := parts[p] == slices.Min(parts) || t > maxTagSearch/2
		if (uses[m] == least && partOK) || t > maxTagSearch {
			tags = append(tags, t)
			uses[m]++
			parts[p]++
		}
	}
	if len(tags) < k {
		return nil, unavailable(fmt.Errorf("found only %d bucket tags for %s", len(tags), sku))
	}
	return tags, nil
}

// partitionsWait bounds WARM's question to Kafka about the topic's partitions.
const partitionsWait = time.Second

// partitions is the orders topic's partition count as Kafka says (the publisher asks it,
// within partitionsWait), else Options.Partitions, else 1.
func (g *Guard) partitions() int {
	if pc, ok := g.opt.Publisher.(PartitionCounter); ok {
		got := make(chan int, 1)
		go func() {
			n, err := pc.Partitions()
			if err != nil {
				n = 0
			}
			got <- n
		}()
		select {
		case n := <-got:
			if n > 0 {
				return n
			}
		case <-time.After(partitionsWait):
		}
	}
	return max(1, g.opt.Partitions)
}

// kafkaPartition is the partition of key among n, as the producer's partitioner (Sarama's
// default hash partitioner: FNV-1a of the key, as an int32, mod n, negated if negative)
// puts it.
func kafkaPartition(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	p := int32(h.Sum32()) % int32(n)
	if p < 0 {
		p = -p
	}
	return int(p)
}
