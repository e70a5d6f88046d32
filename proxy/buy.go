package proxy

import (
	"context"
	"time"

	"seckill-proxy/guard"
	"seckill-proxy/router"
)

// guardBuyer is what the buy engine decides by: package guard's loop API, with the router's
// checks and replies. It is its engine's alone (the buffers it reuses).
type guardBuyer struct {
	r       *router.Router
	g       *guard.Guard
	timeout time.Duration

	as   []*guard.Attempt
	outs []guard.Outcome
	res  []buyOutcome
}

// attempt is a guard.Attempt with the request it is for, which must outlive it.
type attempt struct {
	req guard.BuyRequest
	a   *guard.Attempt
}

func (a *attempt) group() guard.CallGroup { return a.a.Group() }
func (a *attempt) tag() string            { return a.a.Tag() }

func (b *guardBuyer) parse(sess *router.Session, cl router.Class, args [][]byte) (guard.BuyRequest, []byte) {
	return b.r.ParseBuy(sess, cl, args)
}

func (b *guardBuyer) start(req guard.BuyRequest, now time.Time) (buyAttempt, []byte) {
	at := &attempt{req: req}
	if res, ok := b.g.Local(&at.req, now); ok {
		return nil, b.r.AppendBuyReply(nil, &at.req, res)
	}
	a, err := b.g.Start(&at.req)
	if err != nil {
		return nil, b.r.AppendBuyReply(nil, &at.req, guard.BuyResult{Err: err})
	}
	at.a = a
	return at, nil
}

// master finds the master of tag (a SKU, or one of its stock buckets) in the slot map. The
// map is go-redis's, loaded in the background; a load this waits for (the first, or after a
// failover) is bounded by the client's own read and dial timeouts, so no context with a
// timer of its own is made per turn.
func (b *guardBuyer) master(tag string) (string, error) {
	return b.g.MasterOf(context.Background(), tag)
}

// attempts are as's guard attempts, in a buffer reused from one call to the next.
func (b *guardBuyer) attempts(as []buyAttempt) []*guard.Attempt {
	b.as = b.as[:0]
	for _, a := range as {
		b.as = append(b.as, a.(*attempt).a)
	}
	return b.as
}

func (b *guardBuyer) appendCall(dst []byte, groups [][]buyAttempt, eval bool) []byte {
	if len(groups) == 1 && !eval {
		return b.g.AppendCall(dst, b.attempts(groups[0]))
	}
	gs := make([][]*guard.Attempt, len(groups))
	for i, as := range groups {
		gs[i] = make([]*guard.Attempt, len(as))
		for j, a := range as {
			gs[i][j] = a.(*attempt).a
		}
	}
	return b.g.AppendManyCall(dst, gs, eval)
}

// settle's outcomes are valid until the next call.
func (b *guardBuyer) settle(as []buyAttempt, raw []byte, round int, replicated bool) []buyOutcome {
	b.outs = b.g.SettleCall(b.attempts(as), raw, round, replicated, b.outs[:0])
	b.res = b.res[:0]
	for i, o := range b.outs {
		r := buyOutcome{retry: o.Retry, addr: o.Addr, ask: o.Ask, sold: o.Sold, donate: o.Donate}
		if !o.Retry && !o.Donate {
			r.reply = b.r.AppendBuyReply(nil, &as[i].(*attempt).req, o.Result)
		}
		b.res = append(b.res, r)
	}
	return b.res
}

func (b *guardBuyer) timedOut(a buyAttempt) []byte {
	return b.r.AppendBuyReply(nil, &a.(*attempt).req, b.g.TimedOut(a.(*attempt).a))
}

func (b *guardBuyer) unreached(a buyAttempt, err error) []byte {
	return b.r.AppendBuyReply(nil, &a.(*attempt).req, b.g.Unreached(a.(*attempt).a, err))
}

func (b *guardBuyer) late(as []buyAttempt, raw []byte, replicated bool) {
	b.g.Late(b.attempts(as), raw, replicated)
}

func (b *guardBuyer) donate(a buyAttempt, done func(reply []byte)) {
	at := a.(*attempt)
	b.g.Donate(at.a, func(res guard.BuyResult) { done(b.r.AppendBuyReply(nil, &at.req, res)) })
}

func (b *guardBuyer) tee(a buyAttempt, done func(error)) { b.g.Tee(a.(*attempt).a, done) }

func (b *guardBuyer) teeAll(as []buyAttempt) { b.g.TeeAll(b.attempts(as)) }

func (b *guardBuyer) nodeDown(string) { b.g.ReloadSlots() }

func (b *guardBuyer) afterKafka() bool { return b.g.ReplyAfterKafka() }

func (b *guardBuyer) ackReply(a buyAttempt, err error) []byte {
	return b.r.AppendBuyReply(nil, &a.(*attempt).req, b.g.AfterKafka(a.(*attempt).a, err))
}

func (b *guardBuyer) finish(a buyAttempt) { b.g.Finish(a.(*attempt).a) }

func (b *guardBuyer) wait(addr string) ([]byte, int) { return b.g.WaitCommand(addr) }

func (b *guardBuyer) waitReply(raw []byte, want int) bool { return b.g.WaitReply(raw, want) }

func (b *guardBuyer) callTimeout() time.Duration { return b.timeout }

// newGuardEngine makes k's buy engine, deciding through g and replying as r does.
func newGuardEngine(k *core, r *router.Router, g *guard.Guard) *engine {
	return newEngine(k, &guardBuyer{r: r, g: g, timeout: g.CallTimeout()})
}
