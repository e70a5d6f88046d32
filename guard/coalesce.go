package guard

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/internal/coalesce"
)

// maxCoalesce is the most buy scripts one upstream pipeline carries.
const maxCoalesce = 512

// errQueueTimeout fails a call that waited in the queue past its deadline; it was never sent.
var errQueueTimeout = errors.New("redis did not take the call in time")

// call is one client batch's scripts for one master, in the client's order, and the
// WaitGroup that its batch waits on. A call is never split, so one client's buys of one SKU
// run in the order it sent them, as Redis would run them.
type call struct {
	as       []*Attempt
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
	var b []call
	for {
		var ok bool
		if b, ok = coalesce.Gather(c.g.stop, c.calls, b, maxCoalesce, func(cl call) int { return len(cl.as) }); !ok {
			return
		}
		c.send(b)
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
	scripts := c.g.scriptsFor(live)
	for _, sc := range scripts {
		sc.queue(ctx, pipe, c.g.opt.Instance, c.g.opt.Route)
	}
	var wait *redis.Cmd
	addr := c.master.Options().Addr
	if n := c.g.opt.Buy.WaitReplicas; n > 0 && c.g.replicaWaits.on(addr, c.g.opt.Now()) {
		wait = pipe.Do(ctx, "wait", n, c.g.opt.Buy.WaitTimeout.Milliseconds())
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	if wait != nil {
		n, err := wait.Int64()
		if err != nil {
			n = -1
		}
		c.g.waitAcked(addr, n)
	}
	for _, sc := range scripts {
		sc.settle()
	}
	for _, cl := range live {
		cl.done.Done()
	}
}

// maxBuysPerScript bounds the buys of one script call, and so how long it holds Redis.
const maxBuysPerScript = 64

// script is one call of buy.lua: buys of one SKU, with the same expected version, in the
// order their clients sent them.
type script struct {
	key  CallGroup
	keys []string
	as   []*Attempt
	cmd  *redis.Cmd
}

// scriptsFor groups the attempts of a pipeline into script calls, a call per SKU (and
// version) in the order each SKU first appears, so that Redis checks the sale, reads the clock
// and starts a script once for many buys. Each client's buys of one SKU keep their order;
// buys of different SKUs touch different keys, so their relative order cannot matter.
func (g *Guard) scriptsFor(calls []call) []*script {
	var out []*script
	var open map[CallGroup]*script // made only when a second SKU shows up
	for _, cl := range calls {
		for _, a := range cl.as {
			k := a.Group()
			var sc *script
			if last := len(out) - 1; last >= 0 && out[last].key == k {
				sc = out[last] // the common case: one SKU
			} else if len(out) > 0 {
				if open == nil {
					open = map[CallGroup]*script{}
					for _, o := range out {
						open[o.key] = o
					}
				}
				sc = open[k]
			}
			if sc == nil || len(sc.as) == maxBuysPerScript {
				sc = &script{key: k, keys: a.keys}
				out = append(out, sc)
				if open != nil {
					open[k] = sc
				}
			}
			sc.as = append(sc.as, a)
		}
	}
	return out
}

func (sc *script) queue(ctx context.Context, pipe redis.Pipeliner, instance, route string) {
	argv := callArgv(sc.as, instance, route)
	args := make([]any, len(argv))
	for i, a := range argv {
		args[i] = a
	}
	for _, a := range sc.as {
		a.err, a.reply = nil, nil
	}
	if sc.key.Eval {
		sc.cmd = buyScript.Eval(ctx, pipe, sc.keys, args...)
	} else {
		sc.cmd = buyScript.EvalSha(ctx, pipe, sc.keys, args...)
	}
}

// settle hands each attempt its own reply, or the call's error.
func (sc *script) settle() { hand(sc.as, sc.cmd.Val(), sc.cmd.Err()) }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
