package proxy

import (
	"bytes"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/guard"
	"seckill-proxy/router"
)

// The buy path on the event loop. A SECKILL.BUY is answered on the loop from the sold-out
// flags when it can be; otherwise its attempt waits for the end of the turn, when the buys
// of every client for one master are written to the loop's own connection to it as a few
// script calls (one per SKU, up to guard.MaxBuysPerCall buys each), after the turn's
// pass-through commands. The reply settles each buy, or sends it again (a stale version,
// NOSCRIPT, a slot that moved). No goroutine, and no Redis client but the loop's own, serves
// a buy; only Kafka's acknowledgement, with buy.reply_after=kafka, comes from elsewhere.

// buyer is what the core asks of the buy engine (package guard, through the router for the
// replies' encoding).
type buyer interface {
	// isBuy: args is a SECKILL.BUY of sess's for the loop to serve.
	isBuy(sess *router.Session, args [][]byte) bool
	// parse reads it: reply is set when the command fails before the guard (NOAUTH, a wrong
	// argument count or argument).
	parse(sess *router.Session, args [][]byte) (req guard.BuyRequest, reply []byte)
	// start answers a buy from the flags, or refuses it (reply set), or admits it to Redis.
	start(req guard.BuyRequest, now time.Time) (a buyAttempt, reply []byte)
	// master is the node that owns the keys of hash tag tag (guard.CallGroup.Tag).
	master(tag string) (string, error)
	// appendCall writes one script call for attempts of one group.
	appendCall(dst []byte, as []buyAttempt) []byte
	// settle reads a call's reply: an outcome per attempt. replicated: the WAIT after it (if
	// any) counted its replicas; if not, no reply of the call is told (guard.ErrNotKnown).
	settle(as []buyAttempt, raw []byte, round int, replicated bool) []buyOutcome
	// timedOut answers an attempt whose call Redis did not answer in time; late takes the
	// reply that came after, for the orders it sold.
	timedOut(a buyAttempt) []byte
	// unreached answers an attempt whose call could not reach Redis, or whose connection
	// failed before its reply came (UNAVAILABLE, err its cause).
	unreached(a buyAttempt, err error) []byte
	late(as []buyAttempt, raw []byte, replicated bool)
	// donate finishes a buy whose split sale's home bucket had too few units (its outcome
	// says donate): done gets its reply, on a goroutine not the loop's.
	donate(a buyAttempt, done func(reply []byte))
	// tee hands a sold attempt's order to Kafka; with afterKafka, done is called with
	// Kafka's answer (on a goroutine not the loop's), and ackReply makes the buyer's reply.
	// teeAll hands many at once, not waited for: the orders a turn sold.
	tee(a buyAttempt, done func(error))
	teeAll(as []buyAttempt)
	// nodeDown: the connection to a master at addr failed; where slots live may have changed.
	nodeDown(addr string)
	afterKafka() bool
	ackReply(a buyAttempt, err error) []byte
	finish(a buyAttempt)
	// wait is the WAIT that follows the calls to the master at addr (nil: none) and the
	// replicas it asks for; waitReply takes its reply: whether they acknowledged.
	wait(addr string) ([]byte, int)
	waitReply(raw []byte, want int) bool
	callTimeout() time.Duration
}

// buyAttempt is one buy on its way, as the buyer made it.
type buyAttempt interface {
	group() guard.CallGroup
	tag() string // group().Tag(), made once
}

// buyOutcome is what became of one attempt of a call.
type buyOutcome struct {
	reply []byte // the buyer's answer, unless retry
	retry bool
	addr  string // send again there (MOVED; ASK with ask)
	ask   bool
	sold  bool // tee the order
	// donate: the buy goes on through the other stock buckets (buyer.donate)
	donate bool
}

// buyOwner is whom a buy answers: a client of the core's, in the order of its commands, or a
// batch of buys the router read on a goroutine (runBuys), by their index.
type buyOwner interface {
	// buyAnswered takes the reply to the owner's buy seq; its storage is the owner's to keep.
	buyAnswered(k *core, seq uint64, reply []byte)
	// buysOutAdd counts n more (or fewer) of its buys sent to Redis and not answered.
	buysOutAdd(n int)
	// shuttingDown: a buy of its was refused because the server drains.
	shuttingDown()
}

func (c *client) buyAnswered(k *core, seq uint64, reply []byte) { k.complete(c, seq, reply, true) }
func (c *client) buysOutAdd(n int)                              { c.buysOut += n }
func (c *client) shuttingDown()                                 { c.closing = true }

// routerBuys is a batch of the router's buys (runBuys): answer takes each reply by index.
type routerBuys struct{ answer func(i int, reply []byte) }

func (r *routerBuys) buyAnswered(_ *core, seq uint64, reply []byte) { r.answer(int(seq), reply) }
func (r *routerBuys) buysOutAdd(int)                                {}
func (r *routerBuys) shuttingDown()                                 {}

// pendingBuy is a buy in the core: its owner's command, and its attempt.
type pendingBuy struct {
	to    buyOwner
	seq   uint64
	a     buyAttempt
	start time.Time // the turn it was read in
	round int
	addr  string // set for a retry after MOVED or ASK
	ask   bool
}

// buyCall is one script call in flight: the buys it carries, and the WAIT after it.
type buyCall struct {
	buys     []*pendingBuy
	answered bool     // timed out: its buyers were told already
	wait     *buyWait // the WAIT that follows it, if any
	reply    []byte   // its reply, kept until the WAIT's comes
	replied  bool
	out      *node // the node it went to, until it is answered, failed or expired (callOver)
}

// buyWait is a WAIT after a node's calls of one turn, asking for want replicas: the calls are
// settled when it answers.
type buyWait struct {
	calls []*buyCall
	want  int
}

// serveBuy takes a SECKILL.BUY (isBuy said so).
func (k *core) serveBuy(c *client, args [][]byte) {
	req, reply := k.buyer.parse(c.sess, args)
	k.cl.counted(1)
	seq := c.seqNext
	c.seqNext++
	if reply != nil {
		k.complete(c, seq, reply, true)
		return
	}
	k.startBuy(c, seq, req)
}

// runBuys serves buys that the router read on a goroutine of its own (a subscriber's, a
// client of the goroutine-per-client server, a session a reload revoked) as the core serves
// its own clients' buys, on the same engine; answer gets each buy's reply, by its index in
// reqs, on the core's goroutine.
func (k *core) runBuys(reqs []guard.BuyRequest, answer func(i int, reply []byte)) {
	to := &routerBuys{answer: answer}
	for i := range reqs {
		k.startBuy(to, uint64(i), reqs[i])
	}
}

// startBuy answers a buy from the flags, or refuses it, or gathers it for the end of the turn.
func (k *core) startBuy(to buyOwner, seq uint64, req guard.BuyRequest) {
	a, reply := k.buyer.start(req, k.now)
	if reply != nil {
		k.metrics.ObserveBuy(0) // answered in the turn that read it
		to.buyAnswered(k, seq, reply)
		return
	}
	if !k.track(1) {
		k.buyer.finish(a)
		to.buyAnswered(k, seq, redcon.AppendError(nil, errShuttingDown.Error()))
		to.shuttingDown()
		return
	}
	k.buys = append(k.buys, &pendingBuy{to: to, seq: seq, a: a, start: k.now})
	to.buysOutAdd(1)
}

// buyDone ends one buy with reply.
func (k *core) buyDone(b *pendingBuy, reply []byte) {
	k.metrics.ObserveBuy(k.now.Sub(b.start))
	k.buyer.finish(b.a)
	b.to.buysOutAdd(-1)
	b.to.buyAnswered(k, b.seq, reply)
	k.track(-1)
}

// sendBuys writes the buys gathered since the last time, as script calls grouped by node
// and SKU, each group's buys in the order they came.
func (k *core) sendBuys() {
	if len(k.buys) == 0 {
		return
	}
	buys := k.buys
	k.buys = nil
	t := buyTurn{byNode: map[string]*nodeCalls{}, masters: map[string]string{}}
	for _, b := range buys {
		addr, up := k.buyNode(&t, b)
		if up == nil {
			continue
		}
		if k.lim.maxCallsOut > 0 && up.callsOut >= k.lim.maxCallsOut {
			k.later = append(k.later, b) // sent when a call to up is answered
			continue
		}
		t.add(b, up, addr)
	}
	for _, nc := range t.order {
		k.writeCalls(nc)
	}
}

// buyTurn is one sendBuys: its calls by node, in the order the nodes came.
type buyTurn struct {
	order   []*nodeCalls
	byNode  map[string]*nodeCalls
	masters map[string]string // hash tag -> master, looked up once a turn
}

// nodeCalls are a turn's calls to one node (ask: each after ASKING).
type nodeCalls struct {
	up    *node
	ask   bool
	calls []*buyCall
	open  map[guard.CallGroup]*buyCall
}

// buyNode is the node b's call goes to; nil when it cannot be reached, and b is answered.
func (k *core) buyNode(t *buyTurn, b *pendingBuy) (string, *node) {
	addr := b.addr
	if addr == "" {
		tag := b.a.tag()
		if addr = t.masters[tag]; addr == "" {
			var err error
			if addr, err = k.buyer.master(tag); err != nil {
				k.buyDone(b, k.buyer.unreached(b.a, err))
				return "", nil
			}
			t.masters[tag] = addr
		}
	}
	up := k.ownerNodeOf(addr)
	if !up.connected && !up.dialing && k.now.Before(up.retryAt) {
		k.buyDone(b, k.buyer.unreached(b.a, up.lastErr))
		return "", nil
	}
	return addr, up
}

// add puts b into its group's open call to up, or a new one past guard.MaxBuysPerCall.
func (t *buyTurn) add(b *pendingBuy, up *node, addr string) {
	key := addr
	if b.ask {
		key += " ask" // ASKING goes before the call: the call is one of its own
	}
	nc := t.byNode[key]
	if nc == nil {
		nc = &nodeCalls{up: up, ask: b.ask, open: map[guard.CallGroup]*buyCall{}}
		t.byNode[key] = nc
		t.order = append(t.order, nc)
	}
	g := b.a.group()
	call := nc.open[g]
	if call == nil || len(call.buys) == guard.MaxBuysPerCall {
		call = &buyCall{}
		nc.open[g] = call
		nc.calls = append(nc.calls, call)
	}
	call.buys = append(call.buys, b)
}

// writeCalls writes a node's calls of the turn, then the WAIT that covers them, if any.
func (k *core) writeCalls(nc *nodeCalls) {
	up := nc.up
	if !up.connected && !up.dialing {
		up.dialing = true
		k.env.dial(up)
	}
	var w *buyWait
	wait, want := k.buyer.wait(up.addr)
	if wait != nil {
		w = &buyWait{calls: nc.calls, want: want}
	}
	deadline := k.now.Add(k.buyer.callTimeout())
	if len(up.queue) == up.head {
		up.lastRead = k.now
	}
	for _, call := range nc.calls {
		if nc.ask {
			up.out = redcon.AppendArray(up.out, 1)
			up.out = redcon.AppendBulkString(up.out, "ASKING")
			up.queue = append(up.queue, inflight{answered: true, deadline: deadline, discard: true})
		}
		as := make([]buyAttempt, len(call.buys))
		for i, b := range call.buys {
			as[i] = b.a
		}
		up.out = k.buyer.appendCall(up.out, as)
		call.wait, call.out = w, up
		up.callsOut++
		up.queue = append(up.queue, inflight{call: call, deadline: deadline, sent: k.now})
	}
	if w != nil {
		up.out = append(up.out, wait...)
		up.queue = append(up.queue, inflight{wait: w, deadline: deadline})
	}
}

// callOver: call is answered, failed or past its deadline, and counts no longer among its
// node's calls out; the buys held back for that bound go with the next turn's, before them.
func (k *core) callOver(call *buyCall) {
	if call.out == nil {
		return
	}
	call.out.callsOut--
	call.out = nil
	if len(k.later) > 0 {
		k.buys = append(k.later, k.buys...)
		k.later = nil
	}
}

// pendingWork: buys wait to be sent, or sold orders to be teed, at the end of a turn.
func (k *core) pendingWork() bool { return len(k.buys) > 0 || len(k.sold) > 0 }

// teeSold hands the orders sold this turn to Kafka, together.
func (k *core) teeSold() {
	if len(k.sold) > 0 {
		k.buyer.teeAll(k.sold)
		clear(k.sold)
		k.sold = k.sold[:0]
	}
}

// callReply takes the reply of a script call: settled now, or when its WAIT answers.
func (k *core) callReply(call *buyCall, raw []byte) {
	k.callOver(call)
	if call.wait != nil {
		call.reply, call.replied = bytes.Clone(raw), true
		return
	}
	k.settleCall(call, raw, true)
}

// waitReply takes a WAIT's reply, and settles the calls it followed: as they said if the
// replicas acknowledged, else as not known.
func (k *core) waitReply(w *buyWait, raw []byte) {
	replicated := k.buyer.waitReply(raw, w.want)
	for _, call := range w.calls {
		if call.replied {
			k.settleCall(call, call.reply, replicated)
		}
	}
}

// settleCall gives each buy of a call its answer, or sends it again. replicated: see
// buyer.settle.
func (k *core) settleCall(call *buyCall, raw []byte, replicated bool) {
	as := make([]buyAttempt, len(call.buys))
	for i, b := range call.buys {
		as[i] = b.a
	}
	if call.answered {
		k.buyer.late(as, raw, replicated)
		for _, b := range call.buys {
			k.buyer.finish(b.a)
			b.to.buysOutAdd(-1)
			k.track(-1)
		}
		return
	}
	for i, o := range k.buyer.settle(as, raw, call.buys[0].round, replicated) {
		b := call.buys[i]
		switch {
		case o.retry:
			b.round++
			b.addr, b.ask = o.addr, o.ask
			k.buys = append(k.buys, b)
		case o.donate:
			k.buyer.donate(b.a, func(reply []byte) {
				k.env.post(func() { k.buyDone(b, reply) })
			})
		case o.sold && k.buyer.afterKafka():
			k.buyer.tee(b.a, func(err error) {
				k.env.post(func() { k.buyDone(b, k.buyer.ackReply(b.a, err)) })
			})
		case o.sold:
			k.sold = append(k.sold, b.a) // teed at the end of the turn, all together
			k.buyDone(b, o.reply)
		default:
			k.buyDone(b, o.reply)
		}
	}
}

// failCall answers the buys of a call whose connection failed with err (UNAVAILABLE, counted
// by the engine like every UNAVAILABLE it answers: the script may have run); a call whose
// reply came (and waited for its WAIT, which the failure cut) is settled with it as not
// known: no replica was seen to hold what it sold.
func (k *core) failCall(call *buyCall, err error) {
	k.callOver(call)
	if call.replied {
		k.settleCall(call, call.reply, false)
		return
	}
	for _, b := range call.buys {
		if call.answered {
			k.buyer.finish(b.a)
			b.to.buysOutAdd(-1)
			k.track(-1)
			continue
		}
		k.buyDone(b, k.buyer.unreached(b.a, err))
	}
}

// expireCall answers the buys of a call past its deadline; the script may still run, and
// its reply, when it comes, is taken by late.
func (k *core) expireCall(call *buyCall) {
	k.callOver(call)
	call.answered = true
	for _, b := range call.buys {
		b.to.buyAnswered(k, b.seq, k.buyer.timedOut(b.a))
	}
}
