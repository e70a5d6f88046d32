package proxy

import (
	"context"
	"time"

	"seckill-proxy/guard"
	"seckill-proxy/router"
)

// guardBuyer is the buy engine as an event loop's core sees it: package guard's loop API,
// with the router's checks and replies.
type guardBuyer struct {
	r       *router.Router
	g       *guard.Guard
	timeout time.Duration
}

// attempt is a guard.Attempt with the request it is for, which must outlive it.
type attempt struct {
	req guard.BuyRequest
	a   *guard.Attempt
}

func (a *attempt) group() guard.CallGroup { return a.a.Group() }

func (b guardBuyer) isBuy(sess *router.Session, args [][]byte) bool { return b.r.IsBuy(sess, args) }

func (b guardBuyer) parse(sess *router.Session, args [][]byte) (guard.BuyRequest, []byte) {
	return b.r.ParseBuy(sess, args)
}

func (b guardBuyer) start(req guard.BuyRequest, now time.Time) (buyAttempt, []byte) {
	at := &attempt{req: req}
	if res, ok := b.g.Local(&at.req, now); ok {
		return nil, b.r.AppendBuyReply(nil, res)
	}
	a, err := b.g.Start(&at.req)
	if err != nil {
		return nil, b.r.AppendBuyReply(nil, guard.BuyResult{Err: err})
	}
	at.a = a
	return at, nil
}

func (b guardBuyer) master(sku string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	return b.g.MasterOf(ctx, sku)
}

func attempts(as []buyAttempt) []*guard.Attempt {
	out := make([]*guard.Attempt, len(as))
	for i, a := range as {
		out[i] = a.(*attempt).a
	}
	return out
}

func (b guardBuyer) appendCall(dst []byte, as []buyAttempt) []byte {
	return b.g.AppendCall(dst, attempts(as))
}

func (b guardBuyer) settle(as []buyAttempt, raw []byte, round int) []buyOutcome {
	outs := b.g.SettleCall(attempts(as), raw, round, nil)
	res := make([]buyOutcome, len(outs))
	for i, o := range outs {
		res[i] = buyOutcome{retry: o.Retry, addr: o.Addr, ask: o.Ask, sold: o.Sold}
		if !o.Retry {
			res[i].reply = b.r.AppendBuyReply(nil, o.Result)
		}
	}
	return res
}

func (b guardBuyer) timedOut(a buyAttempt) []byte {
	return b.r.AppendBuyReply(nil, b.g.TimedOut(a.(*attempt).a))
}

func (b guardBuyer) late(as []buyAttempt, raw []byte) { b.g.Late(attempts(as), raw) }

func (b guardBuyer) tee(a buyAttempt, done func(error)) { b.g.Tee(a.(*attempt).a, done) }

func (b guardBuyer) afterKafka() bool { return b.g.ReplyAfterKafka() }

func (b guardBuyer) ackReply(a buyAttempt, err error) []byte {
	return b.r.AppendBuyReply(nil, b.g.AfterKafka(a.(*attempt).a, err))
}

func (b guardBuyer) finish(a buyAttempt) { b.g.Finish(a.(*attempt).a) }

func (b guardBuyer) wait() []byte { return b.g.WaitCommand() }

func (b guardBuyer) waitReply(raw []byte) { b.g.WaitReply(raw) }

func (b guardBuyer) callTimeout() time.Duration { return b.timeout }
