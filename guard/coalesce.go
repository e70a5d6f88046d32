package guard

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxCoalesce is the most buy scripts one upstream pipeline carries.
const maxCoalesce = 512

// errQueueTimeout fails a call that waited in the queue past its deadline; it was never sent.
var errQueueTimeout = errors.New("redis did not take the call in time")

// call is one client batch's scripts for one master, in the client's order, and the
// WaitGroup that its batch waits on. A call is never split, so one client's buys of one SKU
// run in the order it sent them, as Redis would run them.
type call struct {
	as       []*attempt
	deadline time.Time
	done     *sync.WaitGroup
}

// coalescer sends the buy scripts of every client to one master as a few shared pipelines:
// each worker takes whatever calls are waiting (up to maxCoalesce), writes them in one go on
// one connection, ends the pipeline with WAIT when configured, and reads the replies back.
// Calls that arrive while a pipeline is in flight make up the next one, so under load many
// clients' calls share one write and one read, both in the proxy and in Redis.
type coalescer struct {
	master *redis.Client
	calls  chan call
	g      *Guard
}

// coalescerFor returns the coalescer of master, starting its workers on first use.
func (g *Guard) coalescerFor(master *redis.Client) *coalescer {
	if c, ok := g.coalescers.Load(master); ok {
		return c.(*coalescer)
	}
	g.coalescersMu.Lock()
	defer g.coalescersMu.Unlock()
	if c, ok := g.coalescers.Load(master); ok {
		return c.(*coalescer)
	}
	c := &coalescer{master: master, calls: make(chan call, g.opt.MaxInflight), g: g}
	g.coalescers.Store(master, c)
	for range g.opt.Buy.PipelinesPerMaster {
		g.workers.Go(c.work)
	}
	return c
}

func (c *coalescer) work() {
	var batch []call
	for {
		select {
		case <-c.g.stop:
			return
		case first := <-c.calls:
			batch = append(batch[:0], first)
		}
		n := len(batch[0].as)
	fill:
		for n < maxCoalesce {
			select {
			case next := <-c.calls:
				batch = append(batch, next)
				n += len(next.as)
			default:
				break fill
			}
		}
		c.send(batch)
	}
}

// send runs one pipeline. Every call in it is marked done, whatever happens.
func (c *coalescer) send(batch []call) {
	now := time.Now()
	deadline := batch[0].deadline
	live := batch[:0]
	for _, cl := range batch {
		if !now.Before(cl.deadline) {
			for _, a := range cl.as {
				a.err = errQueueTimeout
			}
			cl.done.Done()
			continue
		}
		deadline = minTime(deadline, cl.deadline)
		live = append(live, cl)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	pipe := c.master.Pipeline()
	for _, cl := range live {
		for _, a := range cl.as {
			a.queue(ctx, pipe, c.g.opt.Instance)
		}
	}
	var wait *redis.Cmd
	if n := c.g.opt.Buy.WaitReplicas; n > 0 {
		wait = pipe.Do(ctx, "wait", n, c.g.opt.Buy.WaitTimeout.Milliseconds())
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	if wait != nil {
		if n, err := wait.Int64(); err != nil || n < int64(c.g.opt.Buy.WaitReplicas) {
			c.g.stats.waitShort.Add(1)
		}
	}
	for _, cl := range live {
		cl.done.Done()
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
