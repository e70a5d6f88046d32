package proxy

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/internal/resp"
	"seckill-proxy/upstream"
)

const (
	// loopReadSize is how much an event loop reads at once, from a client or a node.
	loopReadSize = 64 << 10
	loopMaxOut   = 1 << 20 // a client with this much of its replies unsent is not read from
	// loopRedialGap: after a failed dial, commands are answered -UNAVAILABLE at once for this
	// long before the next dial is tried.
	loopRedialGap = 100 * time.Millisecond
)

// node is a core's connection to one Redis node: the commands written to it, in order,
// wait for their replies in queue.
type node struct {
	fd   int    // the shell's: its socket, -1 for none
	ev   uint32 // the shell's: the events it waits for
	addr string
	// owner: logged in as the proxy's own user, for buy scripts (not as the restricted
	// pass-through user, which may not write a sale's keys).
	owner bool
	// resp3: logged in with HELLO 3, for the commands of clients that speak RESP3.
	resp3     bool
	connected bool // the shell has a socket for it
	dialing   bool
	retryAt   time.Time // no dial before then; commands get lastErr
	lastErr   error
	out       []byte
	in        []byte
	queue     []inflight
	head      int
	scan      resp.ReplyScanner // where the reply at the front of in ends, kept across reads
	lastRead  time.Time         // the last time it answered anything
	callsOut  int               // buy script calls sent and not answered, failed or expired
}

// inflight is a command sent to Redis, in the order the replies will come back.
type inflight struct {
	c        *client
	seq      uint64
	slot     uint16
	deadline time.Time
	// answered: the client was told already (a timeout); the reply, when it comes, is dropped.
	answered bool
	// raw is the command, kept in front of a cluster for a MOVED or ASK reply.
	raw []byte
	// call is a script call of buys, and wait the WAIT after a node's calls (c is nil for
	// both); discard is the proxy's own command (an ASKING), whose reply nobody wants.
	call    *buyCall
	wait    *buyWait
	discard bool
	// stat counts it in /metrics (nil: no metrics), sent when it went.
	stat *passStat
	sent time.Time
	// ask is its hash in the core's askWindow, charge what it was charged there, and
	// askUnknown whether its reply's size was unknown (0 charge: not in the window).
	ask        uint64
	charge     int64
	askUnknown bool
}

// redirectJob is a command whose reply was MOVED or ASK, to be sent where it says.
type redirectJob struct {
	in    inflight
	reply []byte
	resp3 bool // the command was sent in RESP3, and is followed so
}

// upKey names one of a core's connections to a node: the node's address, and what the
// connection is for (a struct key, so that finding it allocates nothing).
type upKey struct {
	addr string
	kind uint8
	lane uint8 // which of a master's owner connections (upOwner)
}

// The kinds of upKey: pass-through in RESP2, in RESP3, and the proxy's own calls.
const (
	upPass uint8 = iota
	upRESP3
	upOwner
)

// nodeOf is the pass-through connection to addr's node for clients speaking protocol proto.
func (k *core) nodeOf(addr string, proto int) *node {
	key := upKey{addr: addr}
	if proto == 3 {
		key.kind = upRESP3
	}
	up := k.ups[key]
	if up == nil {
		up = &node{addr: addr, fd: -1, resp3: proto == 3}
		k.ups[key] = up
	}
	return up
}

// ownerNodeOf is a connection to addr's node for the proxy's own calls. A buy's WAIT blocks
// its connection in Redis until a replica acknowledges, and every call written behind it
// waits as long: so a core has up to coreLimits.ownerLanes (redis.owner_lanes) owner
// connections to each master, and a turn's calls go on the first lane with
// no WAIT out (a lane not open yet is dialed when written to), else the one with the fewest
// commands out. A lane that failed to connect a moment ago is passed over while another can
// serve; with none, the first is returned, and its error answers the buys.
func (k *core) ownerNodeOf(addr string) *node {
	var best, first *node
	for lane := range uint8(max(1, min(k.lim.ownerLanes, 64))) {
		key := upKey{addr: addr, kind: upOwner, lane: lane}
		up := k.ups[key]
		if up == nil {
			up = &node{addr: addr, fd: -1, owner: true}
			k.ups[key] = up
		}
		if first == nil {
			first = up
		}
		switch {
		case !up.connected && !up.dialing && k.now.Before(up.retryAt):
			continue
		case !up.waitOut():
			return up
		case best == nil || len(up.queue)-up.head < len(best.queue)-best.head:
			best = up
		}
	}
	if best == nil {
		return first
	}
	return best
}

// waitOut: a WAIT written on up has not been answered yet.
func (up *node) waitOut() bool {
	for _, in := range up.queue[up.head:] {
		if in.wait != nil {
			return true
		}
	}
	return false
}

// forward queues one command for the Redis node at addr; slot is its keys', and h its hash
// in the core's askWindow.
func (k *core) forward(c *client, addr string, slot uint16, cmd resp.Command, h uint64) {
	up := k.nodeOf(addr, c.sess.Proto)
	seq := c.seqNext
	c.seqNext++
	k.cl.counted(1)
	if !up.connected && !up.dialing && k.now.Before(up.retryAt) {
		reply := upstream.Unavailable(up.lastErr)
		if k.metrics != nil {
			k.passStat(cmd.Args[0]).done(k.passLat, reply, 0)
			k.metrics.pass.unavailable.WithLabelValues(unavailConnect).Inc()
		}
		k.complete(c, seq, reply, true)
		return
	}
	if !k.track(1) {
		k.complete(c, seq, redcon.AppendError(nil, errShuttingDown.Error()), true)
		c.closing = true
		return
	}
	k.dialIfDown(up)
	start := len(up.out)
	switch {
	case !cmd.Inline && len(up.out) == 0 && len(cmd.Raw) > 4*loopReadSize:
		// A big command, read in many pieces: Redis gets the reader's buffer, without a copy.
		if raw := c.rd.Take(); raw != nil {
			up.out = raw
		} else {
			up.out = append(up.out, cmd.Raw...)
		}
	case !cmd.Inline:
		up.out = append(up.out, cmd.Raw...)
	default: // an inline command: Redis gets it as RESP
		up.out = redcon.AppendArray(up.out, len(cmd.Args))
		for _, a := range cmd.Args {
			up.out = redcon.AppendBulk(up.out, a)
		}
	}
	in := inflight{c: c, seq: seq, deadline: k.now.Add(k.lim.timeout), ask: h}
	in.charge, in.askUnknown, _ = k.asked.ask(h)
	if k.metrics != nil {
		in.stat, in.sent = k.passStat(cmd.Args[0]), k.now
	}
	if k.cluster {
		in.raw = bytes.Clone(up.out[start:])
		in.slot = slot
		c.slots.add(in.slot, addr)
	}
	k.queue(up, in)
	c.passOut++
}

// send appends a command to up's output (write appends it) and queues in, what its reply
// answers; up's node is dialled first if it has no connection. The buy engine writes its
// calls and WAITs through it.
func (k *core) send(up *node, in inflight, write func(out []byte) []byte) {
	k.dialIfDown(up)
	up.out = write(up.out)
	k.queue(up, in)
}

// dialIfDown starts a connection to up's node if it has none and none is being made.
func (k *core) dialIfDown(up *node) {
	if !up.connected && !up.dialing {
		up.dialing = true
		k.env.dial(up)
	}
}

// queue counts in as the answer to the command just appended to up's output: the next reply
// read from up after those queued before it.
func (k *core) queue(up *node, in inflight) {
	if len(up.queue) == up.head {
		up.lastRead = k.now // the wait for an answer starts now
	}
	up.queue = append(up.queue, in)
}

// passStat is the counters of the command named name: the core keeps them by the name as the
// clients send it, so that a command costs one map lookup (bounded: past it, the shared map's).
func (k *core) passStat(name []byte) *passStat {
	if s, ok := k.passNames[string(name)]; ok {
		return s
	}
	if k.passLat == nil {
		k.passLat = k.metrics.pass.newLatency()
	}
	s := k.metrics.pass.stat(name)
	if k.passNames == nil {
		k.passNames = map[string]*passStat{}
	}
	if len(k.passNames) < 2*maxPassNames {
		k.passNames[string(name)] = s
	}
	return s
}

// upConnected: the shell has a socket for up's node.
func (k *core) upConnected(up *node) {
	up.dialing, up.connected, up.lastRead = false, true, k.now
	if k.metrics != nil {
		k.metrics.pass.connects.Inc()
	}
}

// upRead takes what up's node answered, in up.in: the shell read it there.
func (k *core) upRead(up *node) {
	up.lastRead = k.now
	off := 0
	for up.head < len(up.queue) {
		n, err := up.scan.Scan(up.in[off:])
		if err != nil {
			k.upFailed(up, fmt.Errorf("redis %s: %w", up.addr, upstream.ErrProtocol), unavailProtocol)
			return
		}
		if n == 0 {
			break
		}
		if off == 0 && n == len(up.in) && n > 4*loopReadSize {
			// A big reply alone in the buffer: the client's, without a copy.
			k.deliver(up, up.in[:n:n], true)
			up.in, off = nil, 0
			break
		}
		k.deliver(up, up.in[off:off+n], false)
		off += n
	}
	if off < len(up.in) && up.head == len(up.queue) {
		k.upFailed(up, fmt.Errorf("redis %s: %w", up.addr, upstream.ErrProtocol), unavailProtocol)
		return
	}
	if off > 0 { // a reply in part stays at the front; one not begun costs nothing
		up.in = up.in[:copy(up.in, up.in[off:])]
	}
	if len(up.in) == 0 && cap(up.in) > 4*loopReadSize {
		up.in = nil
	}
	up.settle()
}

// readRoom is how much the shell should read from up's node next: at least as much as the
// buffer holds, and at once all of a bulk string whose length came, so that a big reply
// arrives in few reads, and is copied once.
func (up *node) readRoom() int {
	room := max(loopReadSize, len(up.in))
	if need := up.scan.Need(); need > len(up.in) {
		room = max(loopReadSize, need-len(up.in))
	}
	return room
}

// deliver gives the oldest command in flight on up its reply; a MOVED or ASK reply is
// followed first. owned: reply's storage is the client's to keep.
func (k *core) deliver(up *node, reply []byte, owned bool) {
	in := up.queue[up.head]
	up.queue[up.head] = inflight{}
	up.head++
	switch {
	case in.call != nil:
		k.eng.callReply(in.call, reply)
		return
	case in.wait != nil:
		k.eng.waitReply(in.wait, reply)
		return
	case in.discard:
		return
	}
	if in.raw != nil && upstream.IsRedirect(reply) && !in.answered {
		if k.metrics != nil {
			k.metrics.pass.redirect(reply)
		}
		k.redirects = append(k.redirects, redirectJob{in: in, reply: bytes.Clone(reply), resp3: up.resp3})
		if !k.redirecting {
			k.nextRedirects()
		}
		return
	}
	k.done(in, reply, owned)
}

// done ends one command in flight: its client gets reply, unless it was told already.
func (k *core) done(in inflight, reply []byte, owned bool) {
	if in.stat != nil {
		if in.answered {
			reply = timedOutReply
		}
		in.stat.done(k.passLat, reply, k.now.Sub(in.sent))
	}
	in.c.passOut--
	if in.charge > 0 {
		learn := len(reply)
		if in.answered {
			learn = 0 // the reply stands for a timeout
		}
		if k.asked.release(in.ask, in.charge, in.askUnknown, learn) {
			k.wakeAsked()
		}
	}
	if !in.answered {
		k.complete(in.c, in.seq, reply, owned)
	} else if in.c.passOut == 0 && in.c.rd.HasInput() {
		k.markDirty(in.c) // a buy held back by it may go now
	}
	if in.raw != nil {
		k.slotDone(in.c, in.slot)
	}
	k.track(-1)
}

// slotDone counts one command of c's slot answered.
func (k *core) slotDone(c *client, slot uint16) {
	if c.slots.done(slot) && c.rd.HasInput() {
		k.markDirty(c) // a command held back by the slot may go now
	}
}

// nextRedirects hands the redirects waiting to the env, which follows them in turn: a
// pipeline's commands for a slot that moved (a SET, then a GET of the same key) all come back
// redirected, and must run on the new node in the order they were sent.
func (k *core) nextRedirects() {
	jobs := k.redirects
	k.redirects, k.redirecting = nil, len(jobs) > 0
	if len(jobs) > 0 {
		k.cl.followRedirects(jobs)
	}
}

// redirected takes the reply a redirect ended with.
func (k *core) redirected(j redirectJob, reply []byte) { k.done(j.in, reply, true) }

// redirectsDone: the env has followed the last jobs it was given.
func (k *core) redirectsDone() { k.nextRedirects() }

// settle reclaims the answered part of the queue.
func (up *node) settle() {
	switch {
	case up.head == len(up.queue):
		up.queue, up.head = up.queue[:0], 0
	case up.head > 1024 && up.head > len(up.queue)/2:
		up.queue = up.queue[:copy(up.queue, up.queue[up.head:])]
		up.head = 0
	}
}

// commandOf reads back the arguments of a command kept as it was sent.
func commandOf(raw []byte) ([][]byte, error) {
	rd := resp.NewReader(int64(len(raw)))
	rd.Lend(raw)
	cmd, ok, err := rd.Next(false)
	if err == nil && !ok {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the command back: %w", err)
	}
	return cmd.Args, nil
}

// timedOutReply stands, in the metrics, for the reply of a command answered with a timeout.
var timedOutReply = []byte("-UNAVAILABLE timeout\r\n")

// upstreamUnavailable is the reply to a command that could not reach Redis because of err.
func upstreamUnavailable(err error) []byte { return upstream.Unavailable(err) }
