package proxy

import (
	"bytes"
	"context"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/internal/resp"
	"seckill-proxy/router"
)

// The event loop's logic lives here and in core_upstream.go, apart from its sockets: a core
// takes plain inputs (what a client sent, what Redis answered, the time, the results of work
// done elsewhere) and keeps, for each client, the replies it is owed in the order of its
// commands, and for each Redis node, the commands in flight in the order they were sent. What
// it needs done outside (connect to a node, run a command through the router, follow a
// redirect) it asks of its env. The shell (loop_linux.go) moves the bytes: it reads into the
// core, writes what the core holds for each socket, and tells the core how much went out.
// The core is used by one goroutine, its loop's.

// coreLimits bound what a core's clients may hold.
type coreLimits struct {
	maxPipeline int           // commands of one client in flight
	maxReq      int           // bytes of one client's input without a complete command
	maxArgBytes int           // the largest bulk string
	maxOut      int           // bytes of one client's unwritten replies before it is not read
	timeout     time.Duration // a pass-through command's bound
	redialGap   time.Duration // after a failed dial, commands are failed at once this long
	// maxCallsOut bounds the buy script calls out to one node (0: none): the buys that come
	// meanwhile wait, and go together in the next call. An event loop needs no bound, since
	// its turns gather what every client sent; the buy shell's turns would be a buy each.
	maxCallsOut int
	// ownerLanes is how many owner connections to each master it may open (0: 1; ownerNodeOf).
	ownerLanes int
	// askBytes bounds the replies asked of Redis and not read yet (core_askwin.go); 0: none.
	askBytes int64
}

// client is one client connection's state in a core.
type client struct {
	id   int    // the shell's handle (its descriptor)
	ev   uint32 // the shell's: the events it waits for
	sess *router.Session
	rd   *resp.Reader // what it sent, not yet served
	out  []byte       // replies not yet written
	// counted is how much storage the proxy's replyBudget counts for out (the shell's), and
	// outSkipped the written bytes before out in that storage: out is what is left of it.
	counted, outSkipped int
	// win bounds its commands in flight by their replies' size.
	win window

	seqNext uint64            // the sequence number of its next command sent to Redis
	seqOut  uint64            // the sequence number of its next reply to write
	held    map[uint64][]byte // replies that came before those of earlier commands
	bigOut  bool              // the shell's: out held at least bigBuffer since it was last empty

	// slots, in front of a cluster, holds for each slot the node of the client's commands
	// in flight there and their count: a later command of that slot goes elsewhere only once
	// they are answered (redirects included), so that none overtakes an earlier one.
	slots slotUses

	// ctx ends when the client goes: what runs for it elsewhere (a blocking command) stops.
	ctx    context.Context
	cancel context.CancelFunc

	// buysOut counts its buys not yet answered, passOut its pass-through commands: the two go
	// to Redis on connections of their own (buys as the proxy's own user), so one kind waits
	// while the other is out, and neither overtakes the other.
	buysOut, passOut int

	busy    bool // the router serves a batch of its commands elsewhere
	closing bool // close once every reply owed is written (QUIT, a protocol error)
	handoff bool // hand to a goroutine of its own once every reply owed is written
	paused  bool // its next command waits for CLIENT PAUSE to end (core_pause.go)
	closed  bool // gone: replies still owed are dropped
	// shut: the client shut its sending side (a FIN, as `printf ... | nc` sends): what it
	// sent is still served and answered, then it is closed. mayBlock: the batch the router
	// serves for it holds a blocking command, which such a client is not waiting for.
	shut, mayBlock bool
	blocked        bool // the last write did not take everything: wait until writable
	dirty          bool // in core.dirty
	stalled        bool // rd holds commands that wait until the client can be served
	askWaits       bool // in core.asked.waiting
	remote         string
}

// owed is how many commands sent to Redis still wait for their reply to be written.
func (c *client) owed() int { return int(c.seqNext - c.seqOut) }

// core is one event loop's state. Build it with newCore.
type core struct {
	env      nodeEnv
	cl       clientEnv // nil in the buy shell, which has no clients
	eng      *engine   // the buy engine; nil: buys go to the router, on a goroutine of the client's own
	lim      coreLimits
	cluster  bool // in front of a cluster: keep commands for MOVED and ASK, and mind slots
	ups      map[upKey]*node
	dirty    []*client
	now      time.Time
	draining bool
	// held are the clients whose next command CLIENT PAUSE holds, until heldUntil at most.
	held      []*client
	heldUntil time.Time

	// inflight counts the commands sent to Redis and not answered yet, redirects included;
	// while there are any, the core holds a begin.
	inflight int
	// redirects wait for the one job that follows them (redirecting: it is running).
	redirects   []redirectJob
	redirecting bool
	// metrics takes each buy's latency (nil: none); passNames and passLat are the core's own
	// pass-through counters' lookup and latency count (passStat).
	metrics   *Metrics
	passNames map[string]*passStat
	passLat   *passLatency
	// asked bounds, in bytes, the replies asked of Redis and not read (core_askwin.go).
	asked askWindow
}

// newCore makes a core for a shell with clients (an event loop's, or a test's).
func newCore(env coreEnv, lim coreLimits, cluster bool) *core {
	return &core{env: env, cl: env, lim: lim, cluster: cluster, ups: map[upKey]*node{}, asked: askWindow{limit: lim.askBytes}}
}

// newBuyCore makes a core with no clients of its own, for the buys others hand its engine (run).
func newBuyCore(env nodeEnv, lim coreLimits, cluster bool) *core {
	return &core{env: env, lim: lim, cluster: cluster, ups: map[upKey]*node{}}
}

// newClient makes the state of a client that has just connected; what runs for it elsewhere
// runs in a context of parent's.
func (k *core) newClient(parent context.Context, id int, sess *router.Session, remote string) *client {
	ctx, cancel := context.WithCancel(parent)
	return &client{id: id, sess: sess, rd: resp.NewReader(int64(k.lim.maxArgBytes)), remote: remote, ctx: ctx, cancel: cancel}
}

func (k *core) markDirty(c *client) {
	if !c.dirty {
		c.dirty = true
		k.dirty = append(k.dirty, c)
	}
}

// canServe: the client's next command may be served now.
func (k *core) canServe(c *client) bool {
	return !c.closed && !c.busy && !c.closing && !c.handoff && !c.paused && !c.askWaits && len(c.out) < k.lim.maxOut &&
		c.owed() < min(k.lim.maxPipeline, c.win.size())
}

// readable: the client may be read from (a bound on its unserved input besides canServe).
func (k *core) readable(c *client) bool {
	return !c.shut && k.canServe(c) && c.rd.Buffered() <= k.lim.maxReq
}

// clientRead takes what a client sent. data is borrowed: what is left unserved is copied.
func (k *core) clientRead(c *client, data []byte) {
	k.markDirty(c)
	if c.rd.Buffered() == 0 {
		c.rd.Lend(data)
	} else {
		_, _ = c.rd.Write(data)
	}
	k.process(c)
	c.rd.Return()
}

// process serves the commands the client has sent while it can; the rest wait in its reader.
func (k *core) process(c *client) {
	c.stalled = false
	defer func() { c.stalled = c.rd.HasInput() && !k.canServe(c) }()
	defer c.rd.Release()
	for k.canServe(c) {
		cmd, ok, err := c.rd.Next(!c.sess.Authed)
		if err != nil || !ok {
			k.unreadable(c, err)
			return
		}
		if !k.serveOne(c, cmd) {
			return
		}
	}
}

// unreadable answers a reader that holds no whole command: a protocol error, or a request
// that grew past limits.max_arg_bytes and more. Either closes the client once the replies it
// is owed are written.
func (k *core) unreadable(c *client, err error) {
	if err != nil {
		if c.owed() == 0 { // after the replies owed; until then the error comes again
			// AppendError keeps on one line a message that quotes the client's bytes.
			k.reply(c, redcon.AppendError(nil, "ERR "+err.Error()))
			c.closing = true
		}
		return
	}
	if c.rd.Buffered() > k.lim.maxReq && c.owed() == 0 {
		k.reply(c, tooLargeReply(int64(k.lim.maxReq)))
		c.closing = true
	}
}

// serveOne serves cmd, or puts it back: false when the client's next commands wait.
func (k *core) serveOne(c *client, cmd resp.Command) bool {
	c.sess.Active(k.now)
	if k.draining {
		c.rd.Unread()
		if c.owed() == 0 {
			k.reply(c, redcon.AppendError(nil, errShuttingDown.Error()))
			c.closing = true
		}
		return false
	}
	if k.hold(c, cmd.Args) {
		c.rd.Unread()
		return false
	}
	cl := k.cl.classify(c.sess, cmd.Args)
	switch {
	case cl.Kind == router.KindBuy && k.eng != nil:
		if c.passOut > 0 {
			c.rd.Unread() // its pass-through commands before it are answered first
			return false
		}
		k.cl.monitored(c.sess, cmd.Args)
		k.eng.serve(c, cl, cmd.Args)
		return true
	case cl.Kind == router.KindDirect:
		if c.buysOut > 0 || !k.mayGo(c, cl.Addr, cl.Slot) {
			// Its buys before it are answered first; or an earlier command of its slot is
			// still on its way elsewhere.
			c.rd.Unread()
			return false
		}
		h := askKey(cmd.Args)
		if !k.asked.may(h) { // Redis holds its window of replies for this core already
			c.rd.Unread()
			k.asked.wait(c)
			return false
		}
		k.cl.monitored(c.sess, cmd.Args)
		k.forward(c, cl.Addr, cl.Slot, cmd, h)
		return true
	}
	if c.owed() > 0 { // the proxy's commands wait for the replies before them
		c.rd.Unread()
		return false
	}
	if cl.Kind == router.KindImmediate && !c.closed {
		k.cl.monitored(c.sess, cmd.Args)
		c.setOut(k.cl.immediate(c.out, cmd.Args))
		k.markDirty(c)
		return true
	}
	k.serveAside(c, cmd, cl)
	return false
}

// serveAside hands cmd (classified as cl), and the commands that follow it, to be served off
// the loop: a blocking command on a connection of its own, a command with a goroutine of its
// own, or a batch served by the router.
func (k *core) serveAside(c *client, cmd resp.Command, cl router.Class) {
	if cl.Kind == router.KindBlocking && k.cl.startBlocking(c, cl, cmd.Args) {
		// In Redis before anything another client sends after it, as Redis orders them.
		c.busy, c.mayBlock = true, true
		return
	}
	if cl.Kind == router.KindOwnGoroutine {
		c.rd.Unread()
		c.handoff = true
		return
	}
	// The commands that follow go with it, unless the client has yet to log in: an AUTH
	// changes what may follow. A buy ends the batch: the loop runs every buy itself, with
	// one engine (engine.go), after the replies before it. Each is identified on its copy,
	// which the router serves: once.
	cmds, ids := [][][]byte{router.CopyArgs(cmd.Args)}, []router.Class{cl.Unbound()}
	mayBlock := cl.Blocks
	for c.sess.Authed && len(cmds) < k.lim.maxPipeline {
		cmd, ok, err := c.rd.Next(false)
		if err != nil || !ok {
			break
		}
		args := router.CopyArgs(cmd.Args)
		next := k.cl.peek(c.sess, args)
		if next.Kind == router.KindOwnGoroutine || (next.Kind == router.KindBuy && k.eng != nil) || k.paused(args) {
			c.rd.Unread()
			break
		}
		cmds, ids = append(cmds, args), append(ids, next)
		mayBlock = mayBlock || next.Blocks
	}
	c.busy, c.mayBlock = true, mayBlock
	k.cl.serveSlow(c, cmds, ids)
}

// mayGo: a command of the client's for slot may go to addr now. In front of a cluster, while
// the client has commands of that slot in flight to another node (the slot moved, and the
// slot map knows it already, while their MOVED replies are still to come), it waits until
// they are answered, so that it cannot overtake them (codis holds a slot lock likewise).
func (k *core) mayGo(c *client, addr string, slot uint16) bool {
	if !k.cluster || c.slots.len() == 0 {
		return true
	}
	use, ok := c.slots.get(slot)
	return !ok || use.addr == addr
}

func (k *core) reply(c *client, b []byte) {
	if c.closed {
		return
	}
	c.setOut(append(c.out, b...))
	k.markDirty(c)
}

// track counts n commands more (or fewer) in flight. The first takes a begin, so that a
// shutdown waits for the replies, and fails once the server drains; the last gives it back.
func (k *core) track(n int) bool {
	if k.inflight == 0 && n > 0 && !k.env.begin() {
		return false
	}
	k.inflight += n
	if k.inflight == 0 {
		k.env.end()
	}
	return true
}

// complete gives a client the reply to its command number seq, in the order of its commands.
// owned: reply's storage is the client's to keep, not to copy.
func (k *core) complete(c *client, seq uint64, reply []byte, owned bool) {
	if c.closed {
		return
	}
	c.win.learn(len(reply), 1)
	if seq != c.seqOut {
		if c.held == nil {
			c.held = map[uint64][]byte{}
		}
		if !owned {
			reply = bytes.Clone(reply)
		}
		c.held[seq] = reply
		return
	}
	if owned && len(c.out) == 0 {
		c.setOut(reply)
	} else {
		c.setOut(append(c.out, reply...))
	}
	c.seqOut++
	for len(c.held) > 0 {
		r, ok := c.held[c.seqOut]
		if !ok {
			break
		}
		delete(c.held, c.seqOut)
		c.setOut(append(c.out, r...))
		c.seqOut++
	}
	k.markDirty(c)
}

// slowDone takes the router's replies to a batch that serveSlow ran; quit closes the client
// once they are written.
func (k *core) slowDone(c *client, out []byte, quit bool) {
	c.busy = false
	if c.closed {
		return
	}
	k.reply(c, out)
	c.closing = c.closing || quit
	c.rd.Release() // a big command the router served leaves no buffer behind
}

// flushInputs serves what dirty clients can go on with (clients whose input waits until
// they can be served are marked so: see takeDirty), and writes the turn's buys.
func (k *core) flushInputs() {
	for i := 0; i < len(k.dirty); i++ { // process may mark more clients dirty
		switch c := k.dirty[i]; {
		case !c.rd.HasInput():
		case k.canServe(c):
			k.process(c)
		default:
			c.stalled = true
		}
	}
	if k.eng != nil {
		k.eng.endTurn()
	}
}

// takeDirty returns the clients marked dirty, and keeps marked those whose input waits and
// can now be served (a write made room): they are served on the next turn, which then does
// not wait for an event.
func (k *core) takeDirty(after func(c *client)) {
	pending := k.dirty[:0]
	dirty := k.dirty
	for _, c := range dirty {
		c.dirty = false
		after(c)
		if c.stalled && k.canServe(c) {
			c.dirty = true
			pending = append(pending, c)
		}
	}
	clear(dirty[len(pending):]) // the array outlives the turn: it must not keep gone clients (and their buffers) alive
	k.dirty = pending
}

// pendingWork: its engine has buys to send, or sold orders to tee, at the end of a turn.
func (k *core) pendingWork() bool { return k.eng != nil && k.eng.pending() }
