package proxy

import (
	"bytes"

	"seckill-proxy/guard"
	"seckill-proxy/internal/resp"
)

// What the engine does with a call's reply, or with its absence: settle each buy, send it
// again, donate it, tee it; answer the buys of a call that failed or timed out.

// callReply takes the reply of a script call: settled now, or when its WAIT answers. A call
// that Redis refused before running it (CLUSTERDOWN, MOVED, NOSCRIPT...) wrote nothing for a
// replica to hold: it is settled (answered, or sent again) now, not after a WAIT that a
// master cut off from its replica answers only at its timeout, each round.
func (e *engine) callReply(call *buyCall, raw []byte) {
	if call.parts != nil {
		e.manyReply(call, raw)
		return
	}
	e.callOver(call)
	if call.wait != nil && !resp.RefusedBeforeRun(raw) {
		call.reply, call.replied = bytes.Clone(raw), true
		return
	}
	e.settleCall(call, raw, true)
}

// waitReply takes a WAIT's reply, and settles the calls it followed: as they said if the
// replicas acknowledged, else as not known.
func (e *engine) waitReply(w *buyWait, raw []byte) {
	replicated := e.nodes.WaitReply(raw, w.want)
	for _, call := range w.calls {
		if call.replied {
			e.settleCall(call, call.reply, replicated)
		}
	}
}

// expireWait: a WAIT is past its deadline (its master silent: stopped, or cut off with no
// answer at all). The calls it followed whose replies came are answered UNAVAILABLE now, as
// a call past its deadline is: not known, no replica was seen to hold them. The WAIT's reply,
// if it comes, or the connection's failure, finishes them as late replies (settleCall).
func (e *engine) expireWait(w *buyWait) {
	for _, call := range w.calls {
		if call.replied && !call.answered {
			call.answered = true
			for _, b := range call.buys {
				b.to.buyAnswered(e.k, b.seq, e.buyer.Fail(b.a, guard.ErrCallExpired))
			}
		}
	}
}

// waitFailed: the connection failed before a WAIT's reply came; the calls it followed whose
// replies came are settled as not known: no replica was seen to hold what they sold.
func (e *engine) waitFailed(w *buyWait) {
	for _, call := range w.calls {
		if call.replied {
			e.settleCall(call, call.reply, false)
		}
	}
}

// settleCall gives each buy of a call its answer, or sends it again. replicated: see
// buyer.Settle.
func (e *engine) settleCall(call *buyCall, raw []byte, replicated bool) {
	as := attemptsOf(call)
	if call.answered {
		e.buyer.Late(as, raw, replicated)
		e.forget(call)
		return
	}
	later := func(a *guard.Attempt, reply []byte) {
		for _, b := range call.buys {
			if b.a == a {
				e.k.env.post(func() { e.buyDone(b, reply) })
				return
			}
		}
	}
	for i, o := range e.buyer.Settle(as, raw, call.buys[0].round, replicated, later) {
		b := call.buys[i]
		switch {
		case o.Retry:
			b.round++
			b.addr, b.ask = o.Addr, o.Ask
			e.buys = append(e.buys, b)
		case o.Later:
		default:
			e.sold = e.sold || o.Sold
			e.buyDone(b, o.Reply)
		}
	}
}

// failCall answers the buys of a call whose connection failed with err (UNAVAILABLE, counted
// by the engine like every UNAVAILABLE it answers: the script may have run); a call whose
// reply came (and waited for its WAIT, which the failure cut) is settled with it as not
// known: no replica was seen to hold what it sold.
func (e *engine) failCall(call *buyCall, err error) {
	e.callOver(call)
	for _, p := range call.parts {
		e.failCall(p, err)
	}
	if call.replied {
		e.settleCall(call, call.reply, false)
		return
	}
	if call.answered {
		e.buyer.Late(attemptsOf(call), nil, false)
		e.forget(call)
		return
	}
	for _, b := range call.buys {
		e.buyDone(b, e.buyer.Fail(b.a, err))
	}
}

// expireCall answers the buys of a call past its deadline; the script may still run, and
// its reply, when it comes, is taken by late.
func (e *engine) expireCall(call *buyCall) {
	e.callOver(call)
	for _, p := range call.parts {
		e.expireCall(p)
	}
	call.answered = true
	for _, b := range call.buys {
		b.to.buyAnswered(e.k, b.seq, e.buyer.Fail(b.a, guard.ErrCallExpired))
	}
}

// forget ends the buys of a call whose buyers were answered already (its deadline passed),
// once their attempts have ended (buyer.Late): nothing more is told.
func (e *engine) forget(call *buyCall) {
	for _, b := range call.buys {
		b.to.buysOutAdd(-1)
		e.k.track(-1)
	}
}
