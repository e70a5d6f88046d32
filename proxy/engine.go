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
// The servers reach it through a handful of methods: serve (an event loop's client), run (a batch the router read on a goroutine), endTurn and pending (the turn), and
// what becomes of its connections' calls (callReply, waitReply, failCall, waitFailed,
// expireCall, callTimeout, nodeDown). It uses its core for the connections, the turn's
// clock and the drain count; what a buy decides (stock, duplicates, buckets, the scripts'
// words, the reply) is its buyer's (guard.Loop), and where calls go its nodes' (guard.Guard).
type engine struct {
	k     *core
	buyer buyer
	nodes buyNodes
	// buys gathered this turn, written as script calls at its end (sendBuys); sold: orders
	// sold since the last Flush.
	buys []*pendingBuy
	sold bool
	// later holds buys for nodes with lim.maxCallsOut calls out, until one is answered.
	later []*pendingBuy
	// manyEval: masters whose last EVALSHA of buymany.lua answered NOSCRIPT; the next call of
	// many groups to each goes as EVAL.
	manyEval map[string]bool
}

// newEngine makes k's buy engine, deciding through b, its calls going where n says.
func newEngine(k *core, b buyer, n buyNodes) *engine {
	e := &engine{k: k, buyer: b, nodes: n}
	k.eng = e
	return e
}

// nodeDown: the connection to the master at addr failed; where slots live may have changed.
func (e *engine) nodeDown(string) { e.nodes.ReloadSlots() }

// callTimeout is how long a script call is waited for (buy.call_timeout).
func (e *engine) callTimeout() time.Duration { return e.nodes.CallTimeout() }

// endTurn writes the turn's buys and tees the orders it sold.
func (e *engine) endTurn() {
	e.sendBuys()
	if e.sold {
		e.buyer.Flush()
		e.sold = false
	}
}

// buyer is the buy, from a parsed request to the buyer's reply: package guard's Loop (a fake
// in the engine's tests). Every attempt ends once, in Settle (a step with a reply), in Fail
// (but for a call past its deadline, whose reply may still come) or in Late; the engine
// never ends one itself.
type buyer interface {
	// Admit answers a buy from the flags, or refuses it (reply set), or admits it to Redis.
	Admit(req guard.BuyRequest, now time.Time) (*guard.Attempt, []byte)
	// AppendCall writes one script call for the attempts of groups, whose keys one master
	// owns: one group's alone, or many groups' in one call (eval: sent as EVAL, the script's
	// EVALSHA answered NOSCRIPT), whose reply has a value per group.
	AppendCall(dst []byte, groups [][]*guard.Attempt, eval bool) []byte
	// Settle reads a call's reply: a step per attempt. replicated: the WAIT after it (if any)
	// counted its replicas; if not, no reply of the call is told. later gets the reply of a
	// Later step (a donation, Kafka's acknowledgement), on a goroutine not the loop's.
	Settle(as []*guard.Attempt, raw []byte, round int, replicated bool, later func(*guard.Attempt, []byte)) []guard.Step
	// Fail answers an attempt whose call did not come back: past its deadline
	// (guard.ErrCallExpired: the attempt lives on until Late), or not reached, or cut off
	// (UNAVAILABLE, err its cause; the attempt ends).
	Fail(a *guard.Attempt, err error) []byte
	// Late ends attempts whose buyers were told already; raw, if not nil, is their call's
	// reply that came after, for the orders it sold.
	Late(as []*guard.Attempt, raw []byte, replicated bool)
	// Flush tees the orders sold since the last Flush, together: once a turn.
	Flush()
}

// buyNodes is where a buy's calls go: package guard's view of the masters and replicas.
type buyNodes interface {
	// MasterOfTag is the node that owns the keys of hash tag tag (guard.CallGroup.Tag).
	MasterOfTag(tag string) (string, error)
	// ReloadSlots: the connection to a master failed; where slots live may have changed.
	ReloadSlots()
	// WaitCommand is the WAIT that follows the calls to the master at addr (nil: none) and
	// the replicas it asks for (below 0: the master has none online, see NoReplica);
	// WaitReply takes its reply: whether they acknowledged.
	WaitCommand(addr string) ([]byte, int)
	WaitReply(raw []byte, want int) bool
	// NoReplica marks attempts whose calls go to a master with no replica online, as
	// buy.no_replica says (their orders told once Kafka holds them, or told at once); an
	// error: they are refused, and go nowhere (Fail answers them with it).
	NoReplica(as []*guard.Attempt) error
	// CallTimeout is how long a script call is waited for (buy.call_timeout).
	CallTimeout() time.Duration
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
	a     *guard.Attempt
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
	req, reply := e.k.cl.parseBuy(c.sess, cl, args)
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
	a, reply := e.buyer.Admit(req, e.k.now)
	if reply != nil {
		e.k.metrics.ObserveBuy(0) // answered in the turn that read it
		to.buyAnswered(e.k, seq, reply)
		return
	}
	if !e.k.track(1) {
		e.buyer.Late([]*guard.Attempt{a}, nil, false)
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
		tag := b.a.Tag()
		if addr = t.masters[tag]; addr == "" {
			var err error
			if addr, err = e.nodes.MasterOfTag(tag); err != nil {
				e.buyDone(b, e.buyer.Fail(b.a, err))
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
		e.buyDone(b, e.buyer.Fail(b.a, up.lastErr))
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
	g := callKey{b.a.Group(), b.alone}
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
	wait, want := e.nodes.WaitCommand(up.addr)
	if wait != nil {
		w = &buyWait{calls: nc.calls, want: want}
	}
	if want < 0 && !e.unreplicated(nc) {
		return
	}
	deadline := e.k.now.Add(e.nodes.CallTimeout())
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

// unreplicated hands a node's calls, which go to a master with no replica online, to the
// guard (buyNodes.NoReplica); false: they are refused, and their buys answered here.
func (e *engine) unreplicated(nc *nodeCalls) bool {
	var as []*guard.Attempt
	for _, call := range nc.calls {
		for _, b := range call.buys {
			as = append(as, b.a)
		}
	}
	err := e.nodes.NoReplica(as)
	if err == nil {
		return true
	}
	for _, call := range nc.calls {
		for _, b := range call.buys {
			e.buyDone(b, e.buyer.Fail(b.a, err))
		}
	}
	return false
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
func (e *engine) pending() bool { return len(e.buys) > 0 || e.sold }
