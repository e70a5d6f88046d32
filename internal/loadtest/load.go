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
	// Start is when the run began (the timeline's zero).
	Start time.Time
	// LastBuy is when the last request was answered.
	LastBuy time.Time
	// FirstError is the first reply of kind "other", to say what went wrong.
	FirstError string
	// Slowest is the slowest answer: how long it took, and what it was.
	Slowest Slowest
}

// Slowest is the slowest answer of a run, to say where its tail came from.
type Slowest struct {
	Ms      float64 `json:"ms"`
	Reply   string  `json:"reply"`              // its kind (Kind)
	Error   string  `json:"error,omitempty"`    // its error text, if an error
	AfterMs float64 `json:"after_ms,omitempty"` // when it was sent, from the run's start
}

// sampleEvery is the timeline's resolution.
const sampleEvery = 100 * time.Millisecond

// Run drives l against buy. Pipelined requests are sent by pipe when it is not nil (a batch
// of uids in, one result per uid out). done, when not nil, is called as requests finish, and
// onOrder with each order's buyer and the time its buy was answered.
func Run(ctx context.Context, l Load, buy Buyer, pipe func(ctx context.Context, uids []string) []result, done func(n int), onOrder func(uid string, at time.Time)) Result {
	r := &runner{l: l, buy: buy, pipe: pipe, done: done, onOrder: onOrder, start: time.Now(),
		res: Result{Latency: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3), Replies: map[string]int64{}}}
	if l.Rate > 0 {
		r.limiter = rate.NewLimiter(rate.Limit(l.Rate), max(1, l.Pipeline))
	}
	r.slot.hist = hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 2)
	r.slot.rep = map[string]int64{}
	var wg sync.WaitGroup
	for range l.Conns {
		wg.Go(func() { r.conn(ctx) })
	}
	wg.Wait()
	r.res.Start = r.start
	r.res.LastBuy = time.Now()
	r.res.Elapsed = r.res.LastBuy.Sub(r.start)
	r.slot.Lock()
	r.flushSlot(r.res.Elapsed + sampleEvery)
	r.slot.Unlock()
	return r.res
}

// runner is one Run: what its connections share.
type runner struct {
	l       Load
	buy     Buyer
	pipe    func(ctx context.Context, uids []string) []result
	done    func(n int)
	onOrder func(uid string, at time.Time)
	limiter *rate.Limiter
	start   time.Time
	next    atomic.Int64 // the next buyer's index
	mu      sync.Mutex   // guards res
	res     Result
	// slot is the timeline's sample being filled.
	slot struct {
		sync.Mutex
		at   time.Duration
		hist *hdrhistogram.Histogram
		rep  map[string]int64
	}
}

// tally is what one connection measured, merged into the result when it ends.
type tally struct {
	latency          *hdrhistogram.Histogram
	replies          map[string]int64
	orders, notKnown []string
	firstErr         string
	slowest          Slowest
}

// flushSlot closes the timeline's samples up to now; the caller holds r.slot.
func (r *runner) flushSlot(now time.Duration) {
	for now-r.slot.at >= sampleEvery {
		r.res.Timeline = append(r.res.Timeline, Sample{At: r.slot.at, P99: time.Duration(r.slot.hist.ValueAtQuantile(99)) * time.Microsecond, Replies: r.slot.rep})
		r.slot.at += sampleEvery
		r.slot.hist.Reset()
		r.slot.rep = map[string]int64{}
	}
}

// conn is one connection's loop: it takes the next buyers, up to l.Pipeline at a time.
func (r *runner) conn(ctx context.Context) {
	l := r.l
	t := &tally{latency: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3), replies: map[string]int64{}}
	uids := make([]string, 0, l.Pipeline)
	for ctx.Err() == nil {
		from := int(r.next.Add(int64(l.Pipeline))) - l.Pipeline
		if from >= l.Buyers {
			break
		}
		n := min(l.Pipeline, l.Buyers-from)
		if r.limiter != nil && r.limiter.WaitN(ctx, n) != nil {
			break
		}
		uids = uids[:0]
		for i := from; i < from+n; i++ {
			uids = append(uids, l.uid(i))
		}
		t0 := time.Now()
		out := r.send(ctx, uids)
		r.record(t, uids, out, t0, time.Since(t0))
		if r.done != nil {
			r.done(n)
		}
	}
	r.merge(t)
}

// send buys for uids, pipelined when there is a pipe and more than one.
func (r *runner) send(ctx context.Context, uids []string) []result {
	if r.pipe != nil && len(uids) > 1 {
		return r.pipe(ctx, uids)
	}
	out := make([]result, len(uids))
	for i, u := range uids {
		out[i].id, out[i].err = r.buy(ctx, u)
	}
	return out
}

// record counts one batch's replies, answered lat after t0.
func (r *runner) record(t *tally, uids []string, out []result, t0 time.Time, lat time.Duration) {
	us := max(1, lat.Microseconds())
	r.slot.Lock()
	defer r.slot.Unlock()
	r.flushSlot(time.Since(r.start))
	for i, res := range out {
		k := Kind(res.err)
		t.replies[k]++
		r.slot.rep[k]++
		_ = r.slot.hist.RecordValue(us)
		_ = t.latency.RecordValue(us)
		if ms := float64(us) / 1000; ms > t.slowest.Ms {
			t.slowest = Slowest{Ms: ms, Reply: k, AfterMs: float64(t0.Sub(r.start).Microseconds()) / 1000}
			if res.err != nil {
				t.slowest.Error = res.err.Error()
			}
		}
		switch {
		case k == ReplyOrder:
			t.orders = append(t.orders, res.id)
			if r.onOrder != nil {
				r.onOrder(uids[i], t0.Add(lat))
			}
		case k == ReplyUnavailable:
			t.notKnown = append(t.notKnown, uids[i])
		case k == ReplyOther && t.firstErr == "":
			t.firstErr = res.err.Error()
		}
	}
}

func (r *runner) merge(t *tally) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Latency.Merge(t.latency)
	for k, v := range t.replies {
		r.res.Replies[k] += v
		r.res.Requests += v
	}
	r.res.Orders = append(r.res.Orders, t.orders...)
	r.res.NotKnown = append(r.res.NotKnown, t.notKnown...)
	if r.res.FirstError == "" {
		r.res.FirstError = t.firstErr
	}
	if t.slowest.Ms > r.res.Slowest.Ms {
		r.res.Slowest = t.slowest
	}
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
