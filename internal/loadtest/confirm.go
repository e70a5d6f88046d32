package loadtest

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/redis/go-redis/v9"
)

// The wait for outcomes: with -wait-outcome, every buyer who got an order asks for its outcome
// with SECKILL.STATUS <sku> <uid> WAIT <ms> as soon as the buy is answered, on connections of
// their own (a waiting STATUS holds its connection, as a BLPOP does), and the run reports the
// time from the buy's answer to the outcome: bought -> stored.

// Outcomes are what the waits for outcomes saw, in a report.
type Outcomes struct {
	// Confirmed, Rejected and Cancelled count the outcomes told; Pending the waits that ended
	// with none (WAIT's timeout), and Errors those that failed.
	Confirmed int64 `json:"confirmed"`
	Rejected  int64 `json:"rejected"`
	Cancelled int64 `json:"cancelled"`
	Pending   int64 `json:"pending"`
	Errors    int64 `json:"errors"`
	// Delay is the time from a buy's answer to its outcome, for the outcomes told.
	Delay Percentiles `json:"delay_us"`
}

// confirmer runs the waits for outcomes.
type confirmer struct {
	c     *redis.Client
	sku   string
	wait  time.Duration
	jobs  chan confirmJob
	wg    sync.WaitGroup
	mu    sync.Mutex
	hist  *hdrhistogram.Histogram // microseconds
	seen  Outcomes
	close sync.Once
}

type confirmJob struct {
	uid string
	at  time.Time // when the buy was answered
}

// newConfirmer starts conns waits at a time through the proxy at addr, each waiting up to wait;
// backlog bounds the orders queued for a free connection.
func newConfirmer(ctx context.Context, addr, user, password, sku string, conns, backlog int, wait time.Duration) *confirmer {
	cf := &confirmer{
		c: redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password, Protocol: 2,
			PoolSize: conns, ReadTimeout: wait + 10*time.Second}),
		sku: sku, wait: wait, jobs: make(chan confirmJob, backlog),
		hist: hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3),
	}
	for range conns {
		cf.wg.Go(func() {
			for j := range cf.jobs {
				cf.one(ctx, j)
			}
		})
	}
	return cf
}

// add queues the wait for uid's outcome, whose buy was answered at at.
func (cf *confirmer) add(uid string, at time.Time) { cf.jobs <- confirmJob{uid, at} }

// one waits for one outcome.
func (cf *confirmer) one(ctx context.Context, j confirmJob) {
	ms := max(1, cf.wait.Milliseconds())
	reply, err := cf.c.Do(ctx, "seckill.status", cf.sku, j.uid, "WAIT", ms).Text()
	delay := time.Since(j.at)
	cf.mu.Lock()
	defer cf.mu.Unlock()
	state, _, _ := strings.Cut(reply, " ")
	switch {
	case err != nil:
		cf.seen.Errors++
		return
	case state == "confirmed":
		cf.seen.Confirmed++
	case state == "rejected":
		cf.seen.Rejected++
	case state == "cancelled":
		cf.seen.Cancelled++
	default:
		cf.seen.Pending++
		return
	}
	_ = cf.hist.RecordValue(max(1, delay.Microseconds()))
}

// finish waits for every wait queued, and returns what they saw.
func (cf *confirmer) finish() Outcomes {
	cf.close.Do(func() { close(cf.jobs) })
	cf.wg.Wait()
	_ = cf.c.Close()
	cf.mu.Lock()
	defer cf.mu.Unlock()
	out := cf.seen
	if cf.hist.TotalCount() > 0 {
		out.Delay = Percentiles{P50: cf.hist.ValueAtQuantile(50), P90: cf.hist.ValueAtQuantile(90), P99: cf.hist.ValueAtQuantile(99),
			P999: cf.hist.ValueAtQuantile(99.9), Max: cf.hist.Max()}
	}
	return out
}
