package salescan

import (
	"context"
	_ "embed"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// The pending set: the stock buckets that have, or are about to have, outbox entries or
// reservations. A proxy marks a bucket before the first call that may write there (Mark, on
// the buy path, from memory) and again every MarkEvery while it sells there; the marks go to
// Redis within FlushEvery, a command per flush. The sweeper reads only the pending buckets
// each sweep, so that an idle sale costs nothing between its full sweeps, and takes a bucket
// out once it has nothing to do and nobody marked it for Quiet.
//
// What it costs in staleness: a proxy killed between its first write to a bucket and the
// flush of that mark (at most FlushEvery) leaves entries that only a full sweep finds.

//go:embed lua/mark.lua
var markLua string

//go:embed lua/unmark.lua
var unmarkLua string

var (
	markScript   = redis.NewScript(markLua)
	unmarkScript = redis.NewScript(unmarkLua)
)

const (
	// MarkEvery is how often a proxy marks again a bucket it keeps writing to.
	MarkEvery = 5 * time.Second
	// FlushEvery is how long a mark waits in memory at most.
	FlushEvery = 50 * time.Millisecond
	// Quiet is how long a bucket with nothing to do stays pending after its last mark:
	// longer than MarkEvery, so a bucket still sold is never taken out.
	Quiet = 3 * MarkEvery
	// maxQueued bounds the marks waiting for a flush (a flood of new sales): past it a
	// mark waits for the next MarkEvery.
	maxQueued = 100000
)

// PendingKey is the pending set of the sales whose orders go to route.
func PendingKey(route string) string { return leadPrefix + "pending:" + route }

// UnsettledKey is the set of buckets that may have orders without their outcome from the
// sink: marked with the pending set, taken out by the late-order watch once every order has
// its outcome.
const UnsettledKey = leadPrefix + "unsettled"

// Pending marks buckets for one route. Build it with NewPending; Run flushes the marks.
type Pending struct {
	rc   redis.Scripter
	keys []string // the route's pending set, and the unsettled set
	log  *zap.Logger
	now  func() time.Time

	sent sync.Map // tag -> time.Time of its last mark queued

	mu     sync.Mutex
	queued map[string]bool
	kick   chan struct{}
}

// NewPending returns the marker of route's pending set.
func NewPending(rc redis.Scripter, route string, log *zap.Logger) *Pending {
	return &Pending{rc: rc, keys: []string{PendingKey(route), UnsettledKey}, log: log, now: time.Now, queued: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// Mark marks tag's bucket pending (at most every MarkEvery; from memory, it never waits). It
// says whether the mark is queued or was sent within MarkEvery: false when the queue is full,
// and the caller should mark again with its next write rather than wait MarkEvery.
func (p *Pending) Mark(tag string) bool {
	now := p.now()
	if v, ok := p.sent.Load(tag); ok && now.Sub(v.(time.Time)) < MarkEvery {
		return true
	}
	p.mu.Lock()
	queued := len(p.queued) < maxQueued
	if queued {
		p.queued[tag] = true
		p.sent.Store(tag, now)
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	return queued
}

// Run sends the queued marks until ctx ends, at most every FlushEvery, and forgets the marks
// of buckets not sold for a minute.
func (p *Pending) Run(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.flush(context.Background()) // what was marked reaches Redis
			return
		case <-t.C:
			old := p.now().Add(-time.Minute)
			p.sent.Range(func(k, v any) bool {
				if v.(time.Time).Before(old) {
					p.sent.Delete(k)
				}
				return true
			})
		case <-p.kick:
			p.flush(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(FlushEvery):
			}
		}
	}
}

// flush sends the queued marks; those it could not send are queued again.
func (p *Pending) flush(ctx context.Context) {
	p.mu.Lock()
	tags := make([]any, 0, len(p.queued))
	for t := range p.queued {
		tags = append(tags, t)
	}
	clear(p.queued)
	p.mu.Unlock()
	if len(tags) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := markScript.Run(ctx, p.rc, p.keys, tags...).Err(); err != nil {
		p.log.Warn("could not mark buckets pending for the sweeper; trying again", zap.Int("buckets", len(tags)), zap.Error(err))
		p.mu.Lock()
		for _, t := range tags {
			if len(p.queued) < maxQueued {
				p.queued[t.(string)] = true
			}
		}
		p.mu.Unlock()
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// List returns the buckets marked in the set key (PendingKey, UnsettledKey).
func List(ctx context.Context, rc redis.Cmdable, key string) ([]string, error) {
	return rc.ZRange(ctx, key, 0, -1).Result()
}

// Unmark takes tags out of the set key, except those marked within quiet (Quiet).
func Unmark(ctx context.Context, rc redis.Scripter, key string, tags []string, quiet time.Duration) error {
	if len(tags) == 0 {
		return nil
	}
	args := make([]any, 0, len(tags)+1)
	args = append(args, quiet.Milliseconds())
	for _, t := range tags {
		args = append(args, t)
	}
	return unmarkScript.Run(ctx, rc, []string{key}, args...).Err()
}

// MarkNow marks tags in the set key at once (what a full pass found).
func MarkNow(ctx context.Context, rc redis.Scripter, key string, tags []string) error {
	if len(tags) == 0 {
		return nil
	}
	args := make([]any, len(tags))
	for i, t := range tags {
		args[i] = t
	}
	return markScript.Run(ctx, rc, []string{key}, args...).Err()
}
