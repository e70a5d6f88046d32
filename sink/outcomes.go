package sink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/sale"
)

// The outcomes the sink writes back to Redis once MySQL has decided each order: for
// SECKILL.STATUS, and for the buyers waiting on their bucket's outcome stream.

// writeOutcomes records each order's outcome in the result hash of its buyer's home bucket
// (its SKU's, for a sale of one bucket), for SECKILL.STATUS, appends them to that bucket's
// outcome stream, for the buyers waiting, and counts new ones in that bucket's meta
// (outcome.lua, one call per bucket of the batch: only for orders of the sale now in Redis,
// not of one before it). It returns once Redis holds them: on each master, the calls are
// followed by WAIT on the same connection, as the proxy's buys are (buy.wait_replicas, fewer
// on a master with fewer replicas in the cluster's view), since a write that only a master
// holds vanishes when its replica is promoted, and the buyers would be told "pending" for
// ever of an order MySQL confirmed. A call that fails, or whose WAIT comes back short, is
// sent again with the sink's backoff, at most a second apart (outcome.lua counts an outcome
// once, however often it is sent), until ctx ends: it returns false then, and the batch is
// not marked, so that it comes again. Only a call Redis refuses for good (an error reply
// that no failover explains) is given up, logged: MySQL holds the truth, and the late-order
// watch shows the orders.
func (s *Sink) writeOutcomes(ctx context.Context, outcomes []Outcome) bool {
	todo := outcomeCalls(outcomes)
	err := s.retryUpTo(ctx, "redis: write order outcomes", outcomeRetryMax, func() error {
		var err error
		todo, err = s.writeOutcomeCalls(ctx, todo)
		return err
	})
	return err == nil
}

// writeOutcomeCalls sends the calls, grouped by the master that owns them, and returns those
// to send again, with why.
func (s *Sink) writeOutcomeCalls(ctx context.Context, todo []outcomeCall) ([]outcomeCall, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outcomeTimeout)
	defer cancel()
	byMaster := map[*redis.Client][]outcomeCall{}
	var masters []*redis.Client
	for _, c := range todo {
		m, err := s.rc.MasterForKey(wctx, c.keys.Meta)
		if err != nil {
			return todo, err
		}
		if _, ok := byMaster[m]; !ok {
			masters = append(masters, m)
		}
		byMaster[m] = append(byMaster[m], c)
	}
	var again []outcomeCall
	var errs []error
	for _, m := range masters {
		failed, err := s.writeOnMaster(wctx, m, byMaster[m])
		again, errs = append(again, failed...), append(errs, err)
	}
	return again, errors.Join(errs...)
}

// writeOnMaster sends calls, all owned by the master m, in one pipeline on one connection,
// then WAIT on that connection, and returns the calls to send again: those that failed, and
// every one when WAIT came back short.
func (s *Sink) writeOnMaster(ctx context.Context, m *redis.Client, calls []outcomeCall) ([]outcomeCall, error) {
	conn := m.Conn()
	defer conn.Close()
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = outcomeScript.EvalSha(ctx, p, []string{c.keys.Meta, c.keys.Result, c.keys.Outcomes}, c.args...)
		}
		return nil
	})
	var again, written []outcomeCall
	var err error
	for i, c := range cmds {
		switch cerr := c.Err(); {
		case cerr == nil:
			written = append(written, calls[i])
		case refusedForGood(cerr):
			s.log.Error("Redis refused order outcomes; MySQL holds them, STATUS says pending", zap.String("bucket", calls[i].keys.Meta),
				zap.Int("orders", (len(calls[i].args)-1)/outcomeArgs), zap.Error(cerr))
		default:
			again, err = append(again, calls[i]), cmp.Or(err, cerr)
		}
	}
	if redis.HasErrorPrefix(err, "NOSCRIPT") { // a new or promoted node: load it everywhere
		err = errors.Join(err, s.rc.ScriptLoad(ctx, outcomeLua).Err())
	} else if err != nil {
		s.rc.ReloadState(ctx) // a failover may have moved the slots
	}
	return s.waitReplicas(ctx, conn, m, written, again, err)
}

// waitReplicas has WAIT confirm the calls written on conn (to the master m): those it cannot
// confirm join again.
func (s *Sink) waitReplicas(ctx context.Context, conn *redis.Conn, m *redis.Client, written, again []outcomeCall, err error) ([]outcomeCall, error) {
	addr := m.Options().Addr
	n := s.replicas.ToWait(addr, s.cfg.Buy.WaitReplicas)
	if len(written) == 0 || n == 0 {
		return again, err
	}
	got, werr := conn.Wait(ctx, n, s.cfg.Buy.WaitFor()).Result()
	if werr == nil && got >= int64(n) {
		return again, err
	}
	s.replicas.Kick()
	if werr == nil {
		werr = fmt.Errorf("WAIT on %s: %d of %d replicas acknowledged the outcomes in %v", addr, got, n, s.cfg.Buy.WaitFor())
	}
	return append(again, written...), errors.Join(err, werr)
}

// refusedForGood says whether err is an error reply that sending the call again cannot mend:
// not a connection's failure, nor one of the replies of a failover or a busy node.
func refusedForGood(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, transient := range []string{"NOSCRIPT", "UNBLOCKED", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN", "READONLY", "NOREPLICAS", "BUSY"} {
		if redis.HasErrorPrefix(err, transient) {
			return false
		}
	}
	return true
}

// outcomeTimeout bounds one try at a batch's outcomes (its scripts and WAITs), and
// outcomeRetryMax the wait between tries: a failover is over in seconds, and the buyers
// waiting for their outcome should hear within about a second of it.
const (
	outcomeTimeout  = 5 * time.Second
	outcomeRetryMax = time.Second
)

// outcomeArgs is the ARGV outcome.lua takes per order, after the stream's cap; maxOutcomesPerCall bounds the orders
// of one call (and so its ARGV, and how long it holds Redis).
const (
	outcomeArgs        = 9
	maxOutcomesPerCall = 500
)

// outcomeCall is one call of outcome.lua: some of a batch's outcomes in one bucket.
type outcomeCall struct {
	keys sale.Keys
	args []any
}

// outcomeCalls groups outcomes by the bucket that takes them (the buyer's home), in their
// order, at most maxOutcomesPerCall a call: a batch is a call or a few per bucket, not one
// per order.
func outcomeCalls(outcomes []Outcome) []outcomeCall {
	var calls []outcomeCall
	open := map[string]int{} // bucket's hash tag -> index in calls of its call being filled
	for _, o := range outcomes {
		tag := sale.Tag(o.SKU, o.Home)
		i, ok := open[tag]
		if !ok || len(calls[i].args) >= 1+maxOutcomesPerCall*outcomeArgs {
			calls = append(calls, outcomeCall{keys: sale.BucketKeys(o.SKU, o.Home), args: []any{sale.OutcomesKept}})
			i = len(calls) - 1
			open[tag] = i
		}
		count, revoked := "0", "0"
		if o.New {
			count = "1"
		}
		if o.Revoked {
			revoked = "1"
		}
		calls[i].args = append(calls[i].args, o.OrderID, o.Value(), o.Version, o.Status, count, revoked, o.UID, o.Told(), o.BoughtMs)
	}
	return calls
}
