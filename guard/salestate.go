package guard

import (
	"context"
	"errors"
	"maps"
	"math"
	"strconv"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/sale"
)

// A sale's Redis side as INFO, CHECK and the legacy keys read it: every stock bucket, summed.

// saleState is a sale's Redis side, read in one round trip per stock bucket. For a split
// sale the figures are the sum of its buckets' (and the meta's counts too), and parts has
// each bucket's own.
type saleState struct {
	meta     map[string]string
	stock    int64
	buyers   int64
	outbox   int64
	reserved int64
	results  map[string]string // only when asked for
	all      map[string]string // uid -> buyer value, only when asked for
	layout   sale.Layout
	parts    []bucketState
}

// bucketState is one stock bucket's part of a sale.
type bucketState struct {
	tag                                   int
	initial, stock, buyers, outbox, dead  int64
	confirmed, rejected, cancelled, lates int64
}

// summedMeta are the meta's counts that each bucket keeps of its own, summed for the sale.
var summedMeta = []string{"initial", "confirmed", "rejected", "cancelled", "late", "dead"}

func (g *Guard) readSale(ctx context.Context, sku string, full bool) (saleState, error) {
	st := saleState{layout: sale.OneBucket(sku)}
	for b := 0; b < st.layout.K(); b++ {
		k := st.layout.Keys(b)
		pipe := g.rc.Pipeline()
		meta := pipe.HGetAll(ctx, k.Meta)
		stock := pipe.Get(ctx, k.Stock)
		buyers := pipe.HLen(ctx, k.Buyers)
		outbox := pipe.XLen(ctx, k.Outbox)
		reserved := pipe.ZCard(ctx, k.Reserved)
		var all, results *redis.MapStringStringCmd
		if full {
			all = pipe.HGetAll(ctx, k.Buyers)
			results = pipe.HGetAll(ctx, k.Result)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return saleState{}, unavailable(err)
		}
		m := meta.Val()
		if b == 0 {
			if len(m) == 0 {
				return saleState{}, noSale(sku)
			}
			st.meta = m
			if tags, err := sale.ParseBuckets(m["buckets"]); err == nil {
				st.layout.Tags = tags
			}
			if full {
				st.all, st.results = all.Val(), results.Val()
				if st.all == nil || st.results == nil { // the other buckets' are copied in
					st.all, st.results = map[string]string{}, map[string]string{}
					maps.Copy(st.all, all.Val())
					maps.Copy(st.results, results.Val())
				}
			}
		} else {
			for _, f := range summedMeta {
				st.meta[f] = strconv.FormatInt(addSaturating(metaInt(st.meta, f), metaInt(m, f)), 10)
			}
			if full {
				maps.Copy(st.all, all.Val())
				maps.Copy(st.results, results.Val())
			}
		}
		n, _ := stock.Int64()
		st.stock += n
		st.buyers += buyers.Val()
		st.outbox += outbox.Val()
		st.reserved += reserved.Val()
		st.parts = append(st.parts, bucketState{tag: st.layout.Tags[b], initial: metaInt(m, "initial"), stock: n,
			buyers: buyers.Val(), outbox: outbox.Val(), dead: metaInt(m, "dead"), confirmed: metaInt(m, "confirmed"),
			rejected: metaInt(m, "rejected"), cancelled: metaInt(m, "cancelled"), lates: metaInt(m, "late")})
	}
	return st, nil
}

// addSaturating is a+b, held at int64's bounds rather than wrapped (a bucket's field read as
// the most, summed with another's, stays the most).
func addSaturating(a, b int64) int64 {
	sum := a + b
	switch {
	case b > 0 && sum < a:
		return math.MaxInt64
	case b < 0 && sum > a:
		return math.MinInt64
	}
	return sum
}

func metaInt(meta map[string]string, field string) int64 {
	n, err := strconv.ParseInt(meta[field], 10, 64)
	if err != nil {
		f, _ := strconv.ParseFloat(meta[field], 64) // the rate's bucket keeps a fraction
		switch {
		case math.IsNaN(f):
			return 0
		case f >= math.MaxInt64: // a field set by hand to 1e30 reads as the most, not as negative
			return math.MaxInt64
		case f <= math.MinInt64:
			return math.MinInt64
		}
		return int64(f)
	}
	return n
}
