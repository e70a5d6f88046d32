// Package loadtest is seckill-bench's engine: it sets up a sale, drives buyers at the proxy
// over RESP (or at the seeds' in-app design, for comparison), measures throughput and latency
// with an HDR histogram, waits for the sink to drain, and checks the invariants I1-I5 against
// MySQL and Redis. The report and the checks are plain values, so they are tested without
// services.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// Load describes the load: Buyers requests over Conns connections, Pipeline requests per round
// trip, Qty units each, RepeatShare of them from a buyer who already tried (duplicates), at
// Rate requests per second (0: flat out).
type Load struct {
	Buyers      int
	Conns       int
	Pipeline    int
	Qty         int
	RepeatShare float64
	Rate        float64
	// UIDPrefix starts every buyer's uid ("" is "buyer"): load processes run at once on one
	// sale keep their buyers apart with prefixes of their own.
	UIDPrefix string
}

// Validate checks l.
func (l Load) Validate() error {
	switch {
	case l.Buyers < 1:
		return fmt.Errorf("buyers must be at least 1, got %d", l.Buyers)
	case l.Conns < 1:
		return fmt.Errorf("conns must be at least 1, got %d", l.Conns)
	case l.Pipeline < 1:
		return fmt.Errorf("pipeline must be at least 1, got %d", l.Pipeline)
	case l.Qty < 1:
		return fmt.Errorf("qty must be at least 1, got %d", l.Qty)
	case l.RepeatShare < 0 || l.RepeatShare >= 1:
		return fmt.Errorf("repeat share must be in [0, 1), got %v", l.RepeatShare)
	case l.Rate < 0:
		return fmt.Errorf("rate must not be negative, got %v", l.Rate)
	}
	return nil
}

// uid is the buyer of request i. With a repeat share r, in every block of 1,000 requests
// after the first, the first r*1000 come from a buyer who already tried: the last one of the
// block before.
func (l Load) uid(i int) string {
	if i >= 1000 && float64(i%1000) < l.RepeatShare*1000 {
		i = i - i%1000 - 1
	}
	if l.UIDPrefix != "" {
		return l.UIDPrefix + strconv.Itoa(i)
	}
	return "buyer" + strconv.Itoa(i)
}

// Buyer makes one buy; reply is the order id, or err the reply error.
type Buyer func(ctx context.Context, uid string) (string, error)

// Kinds of reply, counted in Result.Replies.
const (
	ReplyOrder       = "order"
	ReplySoldOut     = "SOLDOUT"
	ReplyDuplicate   = "DUPLICATE"
	ReplyClosed      = "CLOSED"
	ReplyUnavailable = "UNAVAILABLE"
	ReplyLimited     = "LIMITED"
	ReplyBusy        = "BUSY"
	ReplyOther       = "other"
)

// Kind classifies a buy's reply.
func Kind(err error) string {
	if err == nil {
		return ReplyOrder
	}
	word, _, _ := strings.Cut(err.Error(), " ")
	switch word {
	case ReplySoldOut, ReplyDuplicate, ReplyClosed, ReplyUnavailable, ReplyLimited, ReplyBusy:
		return word
	}
	return ReplyOther
}

// Sample is one slice of the run, for the chart.
type Sample struct {
	At      time.Duration    `json:"at_ms"`
	P99     time.Duration    `json:"p99_us"`
	Replies map[string]int64 `json:"replies"`
}

// Result is what a run measured.
type Result struct {
	Requests int64
	Elapsed  time.Duration
	Latency  *hdrhistogram.Histogram // microseconds
	Replies  map[string]int64
	// Orders are the order ids handed out, each once; NotKnown the buyers told UNAVAILABLE
	// (the outcome not known), by uid.
	Orders   []string
	NotKnown []string
	Timeline []Sample
	// LastBuy is when the last request was answered.
	LastBuy time.Time
	// FirstError is the first reply of kind "other", to say what went wrong.
	FirstError string
}

// sampleEvery is the timeline's resolution.
const sampleEvery = 100 * time.Millisecond

// Run drives l against buy. Pipelined requests are sent by pipe when it is not nil (a batch
// of uids in, one result per uid out). done, when not nil, is called as requests finish, and
// onOrder with each order's buyer and the time its buy was answered.
func Run(ctx context.Context, l Load, buy Buyer, pipe func(ctx context.Context, uids []string) []result, done func(n int), onOrder func(uid string, at time.Time)) Result {
	var limiter *rate.Limiter
	if l.Rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(l.Rate), max(1, l.Pipeline))
	}
	var next atomic.Int64
	var mu sync.Mutex
	res := Result{Latency: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3), Replies: map[string]int64{}}
	start := time.Now()
	var slot struct {
		sync.Mutex
		at   time.Duration
		hist *hdrhistogram.Histogram
		rep  map[string]int64
	}
	slot.hist = hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 2)
	slot.rep = map[string]int64{}
	flushSlot := func(now time.Duration) {
		for now-slot.at >= sampleEvery {
			res.Timeline = append(res.Timeline, Sample{At: slot.at, P99: time.Duration(slot.hist.ValueAtQuantile(99)) * time.Microsecond, Replies: slot.rep})
			slot.at += sampleEvery
			slot.hist.Reset()
			slot.rep = map[string]int64{}
		}
	}
	var wg sync.WaitGroup
	for range l.Conns {
		wg.Go(func() {
			local := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
			replies := map[string]int64{}
			var orders, notKnown []string
			var firstErr string
			uids := make([]string, 0, l.Pipeline)
			for ctx.Err() == nil {
				from := int(next.Add(int64(l.Pipeline))) - l.Pipeline
				if from >= l.Buyers {
					break
				}
				n := min(l.Pipeline, l.Buyers-from)
				if limiter != nil && limiter.WaitN(ctx, n) != nil {
					break
				}
				uids = uids[:0]
				for i := from; i < from+n; i++ {
					uids = append(uids, l.uid(i))
				}
				t0 := time.Now()
				var out []result
				if pipe != nil && n > 1 {
					out = pipe(ctx, uids)
				} else {
					out = make([]result, n)
					for i, u := range uids {
						out[i].id, out[i].err = buy(ctx, u)
					}
				}
				lat := time.Since(t0)
				us := max(1, lat.Microseconds())
				slot.Lock()
				flushSlot(time.Since(start))
				for i, r := range out {
					k := Kind(r.err)
					replies[k]++
					slot.rep[k]++
					_ = slot.hist.RecordValue(us)
					_ = local.RecordValue(us)
					if k == ReplyOrder {
						orders = append(orders, r.id)
						if onOrder != nil {
							onOrder(uids[i], t0.Add(lat))
						}
					} else if k == ReplyUnavailable {
						notKnown = append(notKnown, uids[i])
					} else if k == ReplyOther && firstErr == "" {
						firstErr = r.err.Error()
					}
				}
				slot.Unlock()
				if done != nil {
					done(n)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.Latency.Merge(local)
			for k, v := range replies {
				res.Replies[k] += v
				res.Requests += v
			}
			res.Orders = append(res.Orders, orders...)
			res.NotKnown = append(res.NotKnown, notKnown...)
			if res.FirstError == "" {
				res.FirstError = firstErr
			}
		})
	}
	wg.Wait()
	res.LastBuy = time.Now()
	res.Elapsed = res.LastBuy.Sub(start)
	slot.Lock()
	flushSlot(res.Elapsed + sampleEvery)
	slot.Unlock()
	return res
}

type result struct {
	id  string
	err error
}

// ProxyBuyer buys through the proxy's SECKILL.BUY.
func ProxyBuyer(c redis.UniversalClient, sku string, qty int) (Buyer, func(context.Context, []string) []result) {
	one := func(ctx context.Context, uid string) (string, error) {
		return c.Do(ctx, "seckill.buy", sku, uid, qty).Text()
	}
	many := func(ctx context.Context, uids []string) []result {
		p := c.Pipeline()
		cmds := make([]*redis.Cmd, len(uids))
		for i, u := range uids {
			cmds[i] = p.Do(ctx, "seckill.buy", sku, u, qty)
		}
		_, _ = p.Exec(ctx)
		out := make([]result, len(uids))
		for i, cmd := range cmds {
			out[i].id, out[i].err = cmd.Text()
		}
		return out
	}
	return one, many
}

// Throughput is requests per second.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// ErrNoRequests is returned by a report of a run that made none.
var ErrNoRequests = errors.New("no requests were made")
