package sink

import (
	"context"
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
// not of one before it). MySQL already holds the truth: a failure here only leaves
// STATUS at "pending" until the order is seen again, so it is logged, not retried forever.
func (s *Sink) writeOutcomes(ctx context.Context, outcomes []Outcome) {
	todo := outcomeCalls(outcomes)
	for attempt := 0; attempt < 3 && len(todo) > 0; attempt++ {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		pipe := s.rc.Pipeline()
		cmds := make([]*redis.Cmd, len(todo))
		for i, c := range todo {
			cmds[i] = outcomeScript.EvalSha(wctx, pipe, []string{c.keys.Meta, c.keys.Result, c.keys.Outcomes}, c.args...)
		}
		_, err := pipe.Exec(wctx)
		var failed []outcomeCall
		noScript := false
		orders := 0
		for i, c := range cmds {
			if c.Err() != nil {
				failed = append(failed, todo[i])
				orders += (len(todo[i].args) - 1) / outcomeArgs
				noScript = noScript || redis.HasErrorPrefix(c.Err(), "NOSCRIPT")
			}
		}
		if noScript { // a new or promoted node: load the script everywhere, and go again
			err = s.rc.ScriptLoad(wctx, outcomeLua).Err()
		}
		cancel()
		if len(failed) > 0 && !noScript {
			s.log.Warn("could not write order outcomes to Redis", zap.Int("orders", orders), zap.Int("attempt", attempt+1), zap.Error(err))
		}
		todo = failed
	}
}

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
