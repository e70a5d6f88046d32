package proxy

import (
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

// engine is the buy engine: it owns each buy from the request to the reply. It answers what
// the sold-out flags can, gathers the rest of a turn by master and SKU, writes them as
// script calls on its core's connections to the masters (logged in as the proxy's own user),
// and settles each reply: an answer, a retry (a stale version, NOSCRIPT, a slot that moved),
// a donation to other buckets, a tee to Kafka. It answers calls that time out or fail.
//
// The servers reach it through a handful of methods: isBuy and serve (an event loop's
// client), run (a batch the router read on a goroutine), endTurn and pending (the turn), and
// what becomes of its connections' calls (callReply, waitReply, failCall, waitFailed,
// expireCall, callTimeout, nodeDown). It uses its core for the connections, the turn's
// clock and the drain count; what a buy decides (stock, duplicates, buckets, the scripts'
// words) is its buyer's (package guard's, through guardBuyer).
type engine struct {
	k     *core
	buyer buyer
	// buys gathered this turn, written as script calls at its end (sendBuys); sold, the
	// attempts that sold, teed at its end (teeSold).
	buys []*pendingBuy
	sold []buyAttempt
	// later holds buys for nodes with lim.maxCallsOut calls out, until one is answered.
	later []*pendingBuy
	// manyEval: masters whose last EVALSHA of buymany.lua answered NOSCRIPT; the next call of
	// many groups to each goes as EVAL.
	manyEval map[string]bool
}

// newEngine makes k's buy engine, deciding through b.
func newEngine(k *core, b buyer) *engine {
	e := &engine{k: k, buyer: b}
	k.eng = e
	return e
}

// nodeDown: the connection to the master at addr failed; where slots live may have changed.
func (e *engine) nodeDown(addr string) { e.buyer.nodeDown(addr) }

// callTimeout is how long a script call is waited for (buy.call_timeout).
func (e *engine) callTimeout() time.Duration { return e.buyer.callTimeout() }

// endTurn writes the turn's buys and tees the orders it sold.
func (e *engine) endTurn() {
	e.sendBuys()
	e.teeSold()
}

// buyer is what the engine asks of package guard (through the router for the replies'
// encoding): the decisions.
type buyer interface {
	// parse reads args, a router.KindBuy command of sess's (classified as cl): reply is set
	// when the command fails before the guard (NOAUTH, a wrong argument count or argument).
	parse(sess *router.Session, cl router.Class, args [][]byte) (req guard.BuyRequest, reply []byte)
	// start answers a buy from the flags, or refuses it (reply set), or admits it to Redis.
	start(req guard.BuyRequest, now time.Time) (a buyAttempt, reply []byte)
	// master is the node that owns the keys of hash tag tag (guard.CallGroup.Tag).
	master(tag string) (string, error)
	// appendCall writes one script call for the attempts of groups, whose keys one master
	// owns: one group's alone, or many groups' in one call (eval: sent as EVAL, the script's
	// EVALSHA answered NOSCRIPT), whose reply has a value per group (guard.AppendManyCall).
	appendCall(dst []byte, groups [][]buyAttempt, eval bool) []byte
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
	// alone: its call goes on its own, not with other SKUs' (its keys were not all on the
	// master a call of many SKUs went to).
	alone bool
}

// buyCall is one script call in flight: the buys it carries, and the WAIT after it.
type buyCall struct {
	buys     []*pendingBuy
	answered bool     // timed out: its buyers were told already
	wait     *buyWait // the WAIT that follows it, if any
	reply    []byte   // its reply, kept until the WAIT's comes
	replied  bool
	out      *node // the node it went to, until it is answered, failed or expired (callOver)
	// parts: a call of many groups (buymany.lua), one part per group, each answered by its
	// value in the reply; the parts are what a WAIT settles.
	parts []*buyCall
}

// buyWait is a WAIT after a node's calls of one turn, asking for want replicas: the calls are
// settled when it answers.
type buyWait struct {
	calls []*buyCall
	want  int
}

// serve takes a SECKILL.BUY, classified as cl (router.KindBuy).
func (e *engine) serve(c *client, cl router.Class, args [][]byte) {
	req, reply := e.buyer.parse(c.sess, cl, args)
	e.k.cl.counted(1)
	seq := c.seqNext
	c.seqNext++
	if reply != nil {
		e.k.complete(c, seq, reply, true)
		return
	}
	e.startBuy(c, seq, req)
}

// runBuys serves buys that the router read on a goroutine of its own (a subscriber's, a
// client of the goroutine-per-client server, a session a reload revoked) as the core serves
// its own clients' buys, on the same engine; answer gets each buy's reply, by its index in
// reqs, on the core's goroutine.
func (e *engine) run(reqs []guard.BuyRequest, answer func(i int, reply []byte)) {
	to := &routerBuys{answer: answer}
	for i := range reqs {
		e.startBuy(to, uint64(i), reqs[i])
	}
}

// startBuy answers a buy from the flags, or refuses it, or gathers it for the end of the turn.
func (e *engine) startBuy(to buyOwner, seq uint64, req guard.BuyRequest) {
	a, reply := e.buyer.start(req, e.k.now)
	if reply != nil {
		e.k.metrics.ObserveBuy(0) // answered in the turn that read it
		to.buyAnswered(e.k, seq, reply)
		return
	}
	if !e.k.track(1) {
		e.buyer.finish(a)
		to.buyAnswered(e.k, seq, redcon.AppendError(nil, errShuttingDown.Error()))
		to.shuttingDown()
		return
	}
	e.buys = append(e.buys, &pendingBuy{to: to, seq: seq, a: a, start: e.k.now})
	to.buysOutAdd(1)
}

// buyDone ends one buy with reply.
func (e *engine) buyDone(b *pendingBuy, reply []byte) {
	e.k.metrics.ObserveBuy(e.k.now.Sub(b.start))
	e.buyer.finish(b.a)
	b.to.buysOutAdd(-1)
	b.to.buyAnswered(e.k, b.seq, reply)
	e.k.track(-1)
}

// sendBuys writes the buys gathered since the last time, as script calls grouped by node
// and SKU, each group's buys in the order they came.
func (e *engine) sendBuys() {
	if len(e.buys) == 0 {
		return
	}
	buys := e.buys
	e.buys = nil
	t := buyTurn{byNode: map[string]*nodeCalls{}, masters: map[string]string{}, owners: map[string]*node{}}
	for _, b := range buys {
		addr, up := e.buyNode(&t, b)
		if up == nil {
			continue
		}
		if e.k.lim.maxCallsOut > 0 && up.callsOut >= e.k.lim.maxCallsOut {
			e.later = append(e.later, b) // sent when a call to up is answered
			continue
		}
		t.add(b, up, addr)
	}
	for _, nc := range t.order {
		e.writeCalls(nc)
	}
}

// buyTurn is one sendBuys: its calls by node, in the order the nodes came.
type buyTurn struct {
	order   []*nodeCalls
	byNode  map[string]*nodeCalls
	masters map[string]string // hash tag -> master, looked up once a turn
	owners  map[string]*node  // master -> the owner lane its calls take this turn, chosen once
}

// nodeCalls are a turn's calls to one node (ask: each after ASKING).
type nodeCalls struct {
	up    *node
	ask   bool
	calls []*buyCall
	open  map[callKey]*buyCall
}

// callKey is what the buys of one call share: a group, and whether they go alone.
type callKey struct {
	g     guard.CallGroup
	alone bool
}

// buyNode is the node b's call goes to; nil when it cannot be reached, and b is answered.
func (e *engine) buyNode(t *buyTurn, b *pendingBuy) (string, *node) {
	addr := b.addr
	if addr == "" {
		tag := b.a.tag()
		if addr = t.masters[tag]; addr == "" {
			var err error
			if addr, err = e.buyer.master(tag); err != nil {
				e.buyDone(b, e.buyer.unreached(b.a, err))
				return "", nil
			}
			t.masters[tag] = addr
		}
	}
	up := t.owners[addr]
	if up == nil {
		up = e.k.ownerNodeOf(addr)
		t.owners[addr] = up
	}
	if !up.connected && !up.dialing && e.k.now.Before(up.retryAt) {
		e.buyDone(b, e.buyer.unreached(b.a, up.lastErr))
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
		nc = &nodeCalls{up: up, ask: b.ask, open: map[callKey]*buyCall{}}
		t.byNode[key] = nc
		t.order = append(t.order, nc)
	}
	g := callKey{b.a.group(), b.alone}
	call := nc.open[g]
	if call == nil || len(call.buys) == guard.MaxBuysPerCall {
		call = &buyCall{}
		nc.open[g] = call
		nc.calls = append(nc.calls, call)
	}
	call.buys = append(call.buys, b)
}

// writeCalls writes a node's calls of the turn, then the WAIT that covers them, if any.
func (e *engine) writeCalls(nc *nodeCalls) {
	up := nc.up
	var w *buyWait
	wait, want := e.buyer.wait(up.addr)
	if wait != nil {
		w = &buyWait{calls: nc.calls, want: want}
	}
	deadline := e.k.now.Add(e.buyer.callTimeout())
	for _, call := range e.merge(nc) {
		if nc.ask {
			e.k.send(up, inflight{answered: true, deadline: deadline, discard: true}, appendAsking)
		}
		call.wait, call.out = w, up
		for _, p := range call.parts { // each group's answer waits for the WAIT, as a call's
			p.wait = w
		}
		up.callsOut++
		e.k.send(up, inflight{call: call, deadline: deadline, sent: e.k.now}, func(out []byte) []byte {
			return e.appendCall(out, up.addr, call)
		})
	}
	if w != nil {
		e.k.send(up, inflight{wait: w, deadline: deadline, sent: e.k.now}, func(out []byte) []byte {
			return append(out, wait...)
		})
	}
}

// appendAsking appends ASKING, which goes before a call to the node a slot is moving to.
func appendAsking(out []byte) []byte {
	return redcon.AppendBulkString(redcon.AppendArray(out, 1), "ASKING")
}

// callOver: call is answered, failed or past its deadline, and counts no longer among its
// node's calls out; the buys held back for that bound go with the next turn's, before them.
func (e *engine) callOver(call *buyCall) {
	if call.out == nil {
		return
	}
	call.out.callsOut--
	call.out = nil
	if len(e.later) > 0 {
		e.buys = append(e.later, e.buys...)
		e.later = nil
	}
}

// pending: buys wait to be sent, or sold orders to be teed, at the end of a turn.
func (e *engine) pending() bool { return len(e.buys) > 0 || len(e.sold) > 0 }

// teeSold hands the orders sold this turn to Kafka, together.
func (e *engine) teeSold() {
	if len(e.sold) > 0 {
		e.buyer.teeAll(e.sold)
		clear(e.sold)
		e.sold = e.sold[:0]
	}
}
