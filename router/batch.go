package router

import (
	"context"
	"sync"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/guard"
	"seckill-proxy/upstream"
)

// batch gathers one Serve call's consecutive buys, its consecutive pass-through commands and
// its consecutive SECKILL.WARMs, to send each run at once; a command of another kind sends
// what is gathered first, so that replies keep their commands' order.
type batch struct {
	r       *Router
	s       *Session
	ctx     context.Context
	w       Writer
	buys    []guard.BuyRequest
	buyErrs []error // per gathered buy, its argument error or nil
	pass    [][][]byte
	descs   []upstream.Description // per gathered pass-through command, the policy's description
	answers [][]byte               // per gathered pass-through command (when any has one), its bulk reply's replacement
	queued  [][][]byte             // commands for the open transaction (s.tx)
	warms   [][][]byte             // SECKILL.WARMs of distinct SKUs, run at once (flushWarms)
}

// warmsAtOnce bounds the WARMs of one pipeline that run at once: each is a dozen round trips
// to MySQL and Redis, so a pipeline of ten thousand run one at a time takes nearly a minute.
const warmsAtOnce = 8

// addBuy gathers a buy (req, or the argument error err that answers it).
func (b *batch) addBuy(req guard.BuyRequest, err error) {
	b.flushPass()
	b.flushQueued()
	b.flushWarms()
	if err == nil {
		req.Reply = b.r
		b.buys = append(b.buys, req)
	}
	b.buyErrs = append(b.buyErrs, err)
}

// addPass gathers a pass-through command, with d, the policy's description of it (none for a
// command rewritten); answer, if not nil, replaces its reply when Redis answers with a bulk
// string (scriptLoad's).
func (b *batch) addPass(args [][]byte, answer []byte, d upstream.Description) {
	b.flushBuys()
	b.flushQueued()
	b.flushWarms()
	b.pass = append(b.pass, args)
	b.descs = append(b.descs, d)
	if answer != nil {
		b.answers = append(b.answers, make([][]byte, len(b.pass)-len(b.answers))...)
		b.answers[len(b.pass)-1] = answer
	}
}

// addQueued gathers a command for the open transaction.
func (b *batch) addQueued(args [][]byte) {
	b.flushBuys()
	b.flushPass()
	b.flushWarms()
	b.queued = append(b.queued, args)
}

// addWarm gathers a SECKILL.WARM (args, which stay valid until Serve returns); one of a SKU
// already gathered runs after those, as it would alone.
func (b *batch) addWarm(args [][]byte) {
	b.flushBuys()
	b.flushPass()
	b.flushQueued()
	for _, w := range b.warms {
		if len(args) > 1 && string(w[1]) == string(args[1]) {
			b.flushWarms()
			break
		}
	}
	b.warms = append(b.warms, args)
}

// flush sends what is gathered.
func (b *batch) flush() {
	b.flushBuys()
	b.flushPass()
	b.flushQueued()
	b.flushWarms()
}

// flushWarms runs the gathered WARMs, warmsAtOnce at a time, and writes their replies in order.
func (b *batch) flushWarms() {
	if len(b.warms) == 0 {
		return
	}
	type result struct {
		reply Reply
		err   error
	}
	out := make([]result, len(b.warms))
	slots := make(chan struct{}, warmsAtOnce)
	var wg sync.WaitGroup
	for i, args := range b.warms {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			out[i].reply, out[i].err = b.r.cmdWarm(b.ctx, b.s, args)
		})
	}
	wg.Wait()
	for _, o := range out {
		b.write(o.reply, o.err)
	}
	b.warms = b.warms[:0]
}

func (b *batch) flushQueued() {
	if len(b.queued) == 0 {
		return
	}
	for _, reply := range b.s.tx.QueueAll(b.ctx, b.queued) {
		b.w.WriteRaw(reply)
	}
	b.queued = b.queued[:0]
}

func (b *batch) flushBuys() {
	if len(b.buyErrs) == 0 {
		return
	}
	b.r.writeBuys(b.ctx, b.buys, b.buyErrs, b.w)
	b.buys, b.buyErrs = b.buys[:0], b.buyErrs[:0]
}

func (b *batch) flushPass() {
	if len(b.pass) == 0 {
		return
	}
	observe := b.r.opt.ObservePass
	var start time.Time
	if observe != nil {
		start = time.Now()
	}
	// A blocking command among them says where it waits, for CLIENT UNBLOCK.
	replies := b.r.opt.Upstream.For(b.s.Proto).DoDescribed(upstream.WithBlockedOn(b.ctx, &b.s.blocked), b.pass, b.descs)
	if observe != nil {
		d := time.Since(start)
		for i, reply := range replies {
			observe(b.pass[i], reply, d)
		}
	}
	for i, reply := range replies {
		if i < len(b.answers) && b.answers[i] != nil && len(reply) > 0 && reply[0] == '$' {
			reply = redcon.AppendBulk(nil, b.answers[i])
		}
		b.w.WriteRaw(reply)
	}
	b.pass, b.descs, b.answers = b.pass[:0], b.descs[:0], b.answers[:0]
}

// write writes reply, or err, in the protocol the session speaks (after HELLO, the one it
// chose).
func (b *batch) write(reply Reply, err error) {
	if err != nil {
		WriteError(b.w, err)
		return
	}
	reply.write(writerFor(b.w, b.s))
}
