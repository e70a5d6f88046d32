// Package salescan reads what the proxies' background work needs to know of many sales at
// once: one script call per master for up to Chunk stock buckets, rather than a command per
// bucket and figure. The sweeper and the late-order watch read the open sales through it, so
// that what they cost Redis grows with the sales by a call per Chunk of them, not by several
// commands each.
package salescan

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/sale"
)

// Chunk is the most buckets one call reads: about 0.3 ms of the master's time, so a scan of
// ten thousand sales never holds a master for longer than that at a time.
const Chunk = 500

// fields is what scan.lua returns per bucket.
const fields = 9

//go:embed lua/scan.lua
var scanLua string

var scanScript = redis.NewScript(scanLua)

// Bucket is what one stock bucket (a sale's hash tag: its SKU, or one of its buckets') holds
// now, as the scan read it.
type Bucket struct {
	Tag string
	// Err is the bucket's read's error (its master unknown or unreachable, or its slot moved
	// away mid-scan); the other fields are then zero.
	Err error
	// Outbox is the outbox's length, and OldestMs its oldest entry's time (Redis's, Unix ms;
	// 0 when empty): ForSweep.
	Outbox, OldestMs int64
	// Meta's fields: State ("" when the bucket has no meta), End, Route and Buckets.
	State, End, Route, Buckets string
	// Buyers and Results count the buyers hash and the results hash (ForLate), Reserved the
	// reservations of a split sale's bucket (ForSweep).
	Buyers, Results, Reserved int64
}

// What says what a scan reads besides each bucket's meta.
type What string

const (
	// ForSweep reads the outbox (length, oldest entry) and a split sale's reservations.
	ForSweep What = "sweep"
	// ForLate reads the buyers and the results counted.
	ForLate What = "late"
)

// HasMeta says whether the bucket has a meta (a sale, or a bucket of one).
func (b Bucket) HasMeta() bool { return b.Err == nil && b.State != "" }

// Scan reads tags' buckets' meta and what: the tags are grouped by the master that owns them,
// and each group is read in calls of at most Chunk tags. The result is in tags' order. A call
// that fails sets Err on its tags only.
func Scan(ctx context.Context, rc *redis.ClusterClient, what What, tags []string) []Bucket {
	out := make([]Bucket, len(tags))
	for i, tag := range tags {
		out[i].Tag = tag
	}
	groups, errs := ByMaster(ctx, rc, tags)
	for i, err := range errs {
		out[i].Err = err
	}
	for _, g := range groups {
		idx := g.Idx
		for len(idx) > 0 {
			n := min(len(idx), Chunk)
			scanChunk(ctx, g.Client, what, idx[:n], out)
			idx = idx[n:]
		}
	}
	return out
}

// Group is the stock buckets of one master: its client, and the indexes of its tags.
type Group struct {
	Client *redis.Client
	Idx    []int
}

// ByMaster groups tags (sales' hash tags) by the master that owns each in the slot map, the
// masters in the order first seen; a tag whose master is not known has its error in errs, by
// index.
func ByMaster(ctx context.Context, rc *redis.ClusterClient, tags []string) (groups []Group, errs map[int]error) {
	at := map[string]int{} // master's address -> its group
	for i, tag := range tags {
		m, err := rc.MasterForKey(ctx, sale.Key(tag, "meta"))
		if err != nil {
			if errs == nil {
				errs = map[int]error{}
			}
			errs[i] = err
			continue
		}
		addr := m.Options().Addr
		g, ok := at[addr]
		if !ok {
			g = len(groups)
			at[addr] = g
			groups = append(groups, Group{Client: m})
		}
		groups[g].Idx = append(groups[g].Idx, i)
	}
	return groups, errs
}

// scanChunk reads the buckets out[i] for i in idx, on one master.
func scanChunk(ctx context.Context, c *redis.Client, what What, idx []int, out []Bucket) {
	args := make([]any, 0, len(idx)+2)
	args = append(args, sale.SaleKeyPrefix, string(what))
	for _, i := range idx {
		args = append(args, out[i].Tag)
	}
	v, err := scanScript.Run(ctx, c, nil, args...).Slice()
	if err == nil && len(v) != fields*len(idx) {
		err = fmt.Errorf("salescan: %d values for %d buckets", len(v), len(idx))
	}
	if err != nil {
		for _, i := range idx {
			out[i].Err = err
		}
		return
	}
	for j, i := range idx {
		r := v[j*fields : (j+1)*fields]
		b := &out[i]
		b.Outbox, b.OldestMs = num(r[0]), num(r[1])
		b.State, b.End, b.Route, b.Buckets = sale.Field(r, 2), sale.Field(r, 3), sale.Field(r, 4), sale.Field(r, 5)
		b.Buyers, b.Results, b.Reserved = num(r[6]), num(r[7]), num(r[8])
		if msg, bad := strings.CutPrefix(b.State, "!"); bad {
			*b = Bucket{Tag: b.Tag, Err: errors.New(msg)}
		}
	}
}

// num reads an integer of the script's reply (0 when it is not one).
func num(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// Layout is the sale whose bucket 0 is b (its tag the SKU), with the stock buckets b's meta
// names; an error when they are malformed.
func Layout(b Bucket) (sale.Layout, error) {
	tags, err := sale.ParseBuckets(b.Buckets)
	if err != nil {
		return sale.Layout{}, err
	}
	return sale.Layout{SKU: b.Tag, Tags: tags}, nil
}
