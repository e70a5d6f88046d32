package guard

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/internal/coalesce"
	"seckill-proxy/sale"
)

// The first status reads of the buyers who begin to wait, gathered (flat combining): while one
// call of status.lua is out, the waits that begin meanwhile queue, and the next call reads
// them all, one call per home bucket in one pipeline, at most statusBatchMax buyers a call. A
// wait that begins alone costs one call, as STATUS does; a rush of 10,000 buyers who begin to
// wait together costs tens, not 10,000.

// statusBatchMax bounds the buyers one status.lua call reads (and so how long it holds Redis).
const statusBatchMax = 500

// statusAsk is one buyer's first status read, waiting for its call.
type statusAsk struct {
	sku, uid string
	keys     sale.Keys // the buyer's home bucket, as this proxy knows the layout
	out      chan statusAnswer
}

type statusAnswer struct {
	st  Status
	err error
}

// batchedStatus is Status for a buyer who begins to wait, read together with the others who
// begin meanwhile; k is the buyer's home bucket.
func (g *Guard) batchedStatus(ctx context.Context, sku, uid string, k sale.Keys) (Status, error) {
	ask := statusAsk{sku: sku, uid: uid, keys: k, out: make(chan statusAnswer, 1)}
	select {
	case g.statusAsks <- ask:
	case <-ctx.Done():
		return Status{}, unavailable(ctx.Err())
	case <-g.stop:
		return Status{}, unavailable(errors.New("the proxy is shutting down"))
	}
	select {
	case a := <-ask.out:
		return a.st, a.err
	case <-ctx.Done():
		return Status{}, unavailable(ctx.Err())
	}
}

// readStatuses serves the status asks until Close: whatever queued, one call per bucket.
func (g *Guard) readStatuses(ctx context.Context) {
	var batch []statusAsk
	one := func(statusAsk) int { return 1 }
	for {
		var ok bool
		if batch, ok = coalesce.Gather(g.stop, g.statusAsks, batch, statusBatchMax, one); !ok {
			return
		}
		g.answerStatuses(ctx, batch)
		clear(batch) // the array outlives the batch: it must not keep the asks' channels
	}
}

// answerStatuses reads a batch's statuses, one status.lua call per home bucket, pipelined.
func (g *Guard) answerStatuses(ctx context.Context, batch []statusAsk) {
	var groups [][]statusAsk
	at := map[string]int{} // bucket's meta key -> its group
	for _, a := range batch {
		i, ok := at[a.keys.Meta]
		if !ok {
			i = len(groups)
			at[a.keys.Meta] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], a)
	}
	cctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	gen := g.noSales.generation()
	cmds := make([]*redis.Cmd, len(groups))
	pipe := g.rc.Pipeline()
	for i, grp := range groups {
		uids := make([]any, len(grp))
		for j, a := range grp {
			uids[j] = a.uid
		}
		g.waits.reads.Add(1)
		cmds[i] = statusScript.EvalSha(cctx, pipe, grp[0].keys.ScriptKeys(), uids...)
	}
	_, _ = pipe.Exec(cctx) // each call's error is its group's
	for i, grp := range groups {
		v, err := cmds[i].Slice()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			uids := make([]any, len(grp))
			for j, a := range grp {
				uids[j] = a.uid
			}
			v, err = statusScript.Run(cctx, g.rc, grp[0].keys.ScriptKeys(), uids...).Slice()
		}
		if err == nil {
			g.learnStatus(grp[0].sku, v, gen)
		}
		for j, a := range grp {
			switch {
			case err != nil:
				a.out <- statusAnswer{err: unavailable(err)}
			default:
				if _, moved := statusHome(a.sku, a.uid, a.keys, v); moved {
					// The layout changed under this proxy: the buyer's home is another bucket.
					st, err := g.readStatus(cctx, a.sku, a.uid)
					a.out <- statusAnswer{st, err}
					continue
				}
				a.out <- statusAnswer{st: statusOf(v, j)}
			}
		}
	}
}
