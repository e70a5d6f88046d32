package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"seckill-proxy/sale"
)

// spread drives buys spread over many SKUs, flat out or at -rate buys a second (make bench's
// (r), scripts/bench-skus.sh): request i is SECKILL.BUY <prefix><i mod skus> <uid-prefix><i> 1,
// so that every buyer is new and each SKU gets the same share. It prints "orders requests
// seconds".
//
//	seckill-bench spread -addr A -prefix P -skus N [-requests R] [-conns C] [-pipeline D] [-uid-prefix U] [-rate B]
func spread(fs *flag.FlagSet, args []string) int {
	addr := fs.String("addr", "127.0.0.1:6380", "the proxy")
	prefix := fs.String("prefix", "", "the SKUs are <prefix>0 .. <prefix><skus-1>")
	skus := fs.Int("skus", 1, "how many SKUs the buys are spread over")
	requests := fs.Int("requests", 100000, "buys in all")
	conns := fs.Int("conns", 50, "connections, each with one pipeline in flight")
	depth := fs.Int("pipeline", 16, "buys per pipeline")
	uids := fs.String("uid-prefix", "u", "the buyers' uids are <uid-prefix><i>")
	perSecond := fs.Float64("rate", 0, "buys sent per second, in all (0: flat out)")
	if fs.Parse(args) != nil {
		return 2
	}
	switch {
	case *skus < 1 || *requests < 1 || *conns < 1 || *depth < 1:
		fmt.Fprintln(os.Stderr, "seckill-bench spread: -skus, -requests, -conns and -pipeline must be at least 1")
		return 2
	case !(*perSecond >= 0) || math.IsInf(*perSecond, 0):
		fmt.Fprintf(os.Stderr, "seckill-bench spread: -rate %v must be a number of buys a second, 0 for flat out\n", *perSecond)
		return 2
	case !sale.ValidID([]byte(*prefix+strconv.Itoa(*skus-1))) || !sale.ValidID([]byte(*uids+strconv.Itoa(*requests-1))):
		fmt.Fprintf(os.Stderr, "seckill-bench spread: -prefix %q or -uid-prefix %q makes invalid ids\n", *prefix, *uids)
		return 2
	}
	c := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: *conns, Protocol: 2, ReadTimeout: 10 * time.Second})
	defer c.Close()
	r := &spreadRun{c: c, prefix: *prefix, uids: *uids, skus: int64(*skus), total: int64(*requests), depth: int64(*depth),
		pace: rate.NewLimiter(rate.Inf, 0)}
	if *perSecond > 0 {
		r.pace = rate.NewLimiter(rate.Limit(*perSecond), *depth)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range *conns {
		wg.Go(func() { r.conn(context.Background()) })
	}
	wg.Wait()
	fmt.Printf("%d %d %.3f\n", r.orders.Load(), r.total, time.Since(start).Seconds())
	return 0
}

// spreadRun is one run of spread: what its connections share.
type spreadRun struct {
	c                  *redis.Client
	prefix, uids       string
	skus, total, depth int64
	pace               *rate.Limiter
	next, orders       atomic.Int64
}

// conn sends the next pipeline of buys until every request is sent.
func (r *spreadRun) conn(ctx context.Context) {
	for {
		base := r.next.Add(r.depth) - r.depth
		if base >= r.total {
			return
		}
		n := min(r.depth, r.total-base)
		if r.pace.WaitN(ctx, int(n)) != nil {
			return
		}
		pipe := r.c.Pipeline()
		cmds := make([]*redis.Cmd, n)
		for j := range n {
			i := base + j
			cmds[j] = pipe.Do(ctx, "seckill.buy", r.prefix+strconv.FormatInt(i%r.skus, 10), r.uids+strconv.FormatInt(i, 10), 1)
		}
		_, _ = pipe.Exec(ctx)
		for _, cmd := range cmds {
			if cmd.Err() == nil {
				r.orders.Add(1)
			}
		}
	}
}
