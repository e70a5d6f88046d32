package upstream

import (
	"context"
	"strconv"
	"strings"
	"time"

	"seckill-proxy/internal/resp"
)

// Tx is one client connection's transaction state: MULTI ... EXEC and WATCH, pinned to a
// connection of its own to the master that owns the transaction's slot. Redis judges each
// command as it is queued, as it does for its own clients: once the transaction has a slot,
// MULTI and every queued command go to that master as they come, and the client gets Redis's
// own answer (+QUEUED, or the error that makes EXEC answer EXECABORT: an unknown command, a
// wrong arity, out of memory, too few replicas). Before the first command with a key (MULTI,
// PING, ECHO, TIME...) the commands wait here, checked against Redis's command table; they
// go with the first keyed one, or with EXEC when none comes. WATCH pins the connection before
// MULTI. What the proxy refuses (keys in another slot, its own commands, what its policy
// refuses) fails the transaction here: EXEC then sends DISCARD and answers EXECABORT. A Tx is
// used by its connection's goroutine only.
type Tx struct {
	c       *Cluster
	multi   bool
	aborted bool
	queue   [][][]byte // commands waiting for the transaction's slot
	slot    int        // -1: no key yet
	addr    string
	// pinned is the transaction's own connection to addr, after WATCH or the first keyed
	// command; open says MULTI has been sent on it.
	pinned *conn
	open   bool
	// lostWatch: a WATCH was dropped other than by EXEC, DISCARD or UNWATCH (its connection
	// failed), so the next EXEC must not run the queue unwatched.
	lostWatch bool
	queued    int // commands queued in the open MULTI
}

// Queued is the number of commands queued in the open MULTI, or -1 when none is open.
func (t *Tx) Queued() int {
	if !t.multi {
		return -1
	}
	return t.queued
}

// NewTx returns the transaction state of a new client connection.
func (c *Cluster) NewTx() *Tx { return &Tx{c: c, slot: -1} }

// Active reports whether a MULTI is open: then every command goes to Queue.
func (t *Tx) Active() bool { return t.multi }

// Multi opens a transaction; after a WATCH, on the watching connection at once.
func (t *Tx) Multi(ctx context.Context) []byte {
	if t.multi {
		return errorReply("ERR MULTI calls can not be nested")
	}
	t.multi, t.aborted, t.queue, t.queued = true, false, nil, 0
	if t.pinned != nil {
		if _, err := t.send(ctx, [][]byte{[]byte("MULTI")}); err != nil {
			t.lostWatch = true // EXEC answers as if a watched key had changed
		} else {
			t.open = true
		}
	}
	return []byte("+OK\r\n")
}

// bind checks that keys share the transaction's slot, and pins its master.
func (t *Tx) bind(ctx context.Context, keys [][]byte) []byte {
	for _, k := range keys {
		s := int(Slot(k))
		if t.c.opt.Standalone != "" {
			s = 0
		}
		if t.slot == -1 {
			addr, err := t.c.masterAddr(ctx, k)
			if err != nil {
				return unavailable(err)
			}
			t.slot, t.addr = s, addr
		} else if s != t.slot {
			return errorReply(crossSlotTx)
		}
	}
	return nil
}

// crossSlotTx refuses a transaction whose keys span slots: Redis runs a transaction atomically
// on one node only, and per-slot transactions would not be atomic together.
const crossSlotTx = "CROSSSLOT Keys in request don't hash to the same slot (a transaction runs atomically on one Redis node: give its keys one hash tag, such as {order42}, so that they share a slot)"

// Queue sends a command inside MULTI to the transaction's master, and returns Redis's answer;
// before the transaction has a slot, it checks the command and keeps it.
func (t *Tx) Queue(ctx context.Context, args [][]byte) []byte {
	return t.QueueAll(ctx, [][][]byte{args})[0]
}

// QueueAll is Queue for consecutive commands, with one round trip to Redis for them all (a
// client's pipelined transaction costs one, as it does straight to Redis).
func (t *Tx) QueueAll(ctx context.Context, cmds [][][]byte) [][]byte {
	replies := make([][]byte, len(cmds))
	var sends [][][]byte
	var at []int // the command each send answers
	for i, args := range cmds {
		reply, send := t.prepare(ctx, args)
		if !send {
			replies[i] = reply
			if reply[0] == '+' {
				t.queued++
			}
			continue
		}
		if !t.open {
			// MULTI and what waited for the slot go first: Redis queues them as it would
			// have, and a refusal of one of them now (out of memory since, say) makes its
			// EXEC answer EXECABORT.
			if t.pinned == nil {
				cn, err := t.c.node(t.addr).hold(ctx, &t.c.own)
				if err != nil {
					t.aborted = true
					replies[i] = unavailable(err)
					continue
				}
				t.pinned = cn
			}
			sends = append(append(sends, [][]byte{[]byte("MULTI")}), t.queue...)
			t.queue = nil
			t.open = true
		}
		sends = append(sends, copyArgs(args))
		at = append(at, i)
	}
	if len(sends) == 0 {
		return replies
	}
	got, err := t.pinned.roundTripUntil(t.deadline(ctx), sends)
	if err != nil {
		t.unpin(false)
		t.aborted = true
	}
	skip := len(sends) - len(at) // MULTI and the kept commands, answered already
	for j, i := range at {
		if err != nil {
			replies[i] = unavailable(err)
		} else {
			replies[i] = got[skip+j]
			if replies[i][0] == '+' {
				t.queued++
			}
		}
	}
	return replies
}

// prepare checks a command inside MULTI: its reply made here, or send true for Redis to
// judge it on the pinned connection.
func (t *Tx) prepare(ctx context.Context, args [][]byte) (reply []byte, send bool) {
	table, err := t.c.commands(func() context.Context { return ctx })
	if err != nil {
		t.aborted = true
		return unavailable(err), false
	}
	name := strings.ToLower(string(args[0]))
	ci := table.info[name]
	if name == "watch" {
		t.aborted = true
		return errorReply("ERR Command not allowed inside a transaction"), false
	}
	// What the proxy serves specially outside MULTI (a blocking command, DBSIZE, SCAN, a
	// split across slots) goes to the transaction's master as it is, as Redis runs it there:
	// a blocking command does not block, DBSIZE and SCAN see that master, keys must share
	// the slot. Refusals stay refusals.
	if p := t.c.plan(ctx, table, args); p.reply != nil {
		t.aborted = true
		return p.reply, false
	}
	if r := t.bind(ctx, commandKeys(name, ci, args)); r != nil {
		t.aborted = true
		return r, false
	}
	if t.addr == "" || t.lostWatch {
		// No slot yet, so Redis cannot be asked: its command table answers as it would. (A
		// lost WATCH: EXEC will answer as if a watched key had changed.)
		switch {
		case ci == nil:
			t.aborted = true
			return errorReply(resp.UnknownCommand(args)), false
		case (ci.Arity > 0 && len(args) != int(ci.Arity)) || (ci.Arity < 0 && len(args) < -int(ci.Arity)):
			t.aborted = true
			return errorReply(resp.WrongArity(name)), false
		}
		t.queue = append(t.queue, copyArgs(args)) // args are the caller's only until it returns
		return []byte("+QUEUED\r\n"), false
	}
	return nil, true
}

// send runs one command on the pinned connection and returns its reply; a failed connection
// is dropped (and with it any WATCH).
func (t *Tx) send(ctx context.Context, args [][]byte) ([]byte, error) {
	replies, err := t.pinned.roundTripUntil(t.deadline(ctx), [][][]byte{args})
	if err != nil {
		t.unpin(false)
		return nil, err
	}
	return replies[0], nil
}

// deadline bounds one round trip on the pinned connection.
func (t *Tx) deadline(ctx context.Context) time.Time {
	d := time.Now().Add(t.c.opt.Timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

// Exec runs the transaction and returns EXEC's reply: Redis's, on the pinned connection; or,
// for a transaction that never had a key, MULTI, its commands and EXEC sent to a master in
// one round trip.
func (t *Tx) Exec(ctx context.Context) []byte {
	if !t.multi {
		return errorReply("ERR EXEC without MULTI")
	}
	switch {
	case t.aborted:
		if t.open {
			_, _ = t.send(ctx, [][]byte{[]byte("DISCARD")})
		}
		t.reset()
		return errorReply("EXECABORT Transaction discarded because of previous errors.")
	case t.lostWatch:
		t.reset()
		return []byte("*-1\r\n") // as Redis answers a transaction whose watched keys changed
	case t.open:
		reply, err := t.send(ctx, [][]byte{[]byte("EXEC")})
		t.reset()
		if err != nil {
			return unavailable(err)
		}
		return reply
	}
	defer t.reset()
	addr, err := t.c.anyMaster(ctx)
	if err != nil {
		return unavailable(err)
	}
	cmds := append([][][]byte{{[]byte("MULTI")}}, t.queue...)
	cmds = append(cmds, [][]byte{[]byte("EXEC")})
	replies, err := t.c.node(addr).doOwn(ctx, &t.c.own, cmds)
	if err != nil {
		return unavailable(err)
	}
	return replies[len(replies)-1]
}

// Discard drops the transaction and any WATCH.
func (t *Tx) Discard(ctx context.Context) []byte {
	if !t.multi {
		return errorReply("ERR DISCARD without MULTI")
	}
	if t.open {
		_, _ = t.send(ctx, [][]byte{[]byte("DISCARD")})
	}
	t.reset()
	return []byte("+OK\r\n")
}

// Watch pins a connection to the master of the keys and watches them there.
func (t *Tx) Watch(ctx context.Context, args [][]byte) []byte {
	if t.multi {
		return errorReply("ERR WATCH inside MULTI is not allowed")
	}
	if r := t.bind(ctx, args[1:]); r != nil {
		return r
	}
	if t.pinned == nil {
		cn, err := t.c.node(t.addr).hold(ctx, &t.c.own)
		if err != nil {
			return unavailable(err)
		}
		t.pinned = cn
	}
	reply, err := t.send(ctx, args)
	if err != nil {
		return unavailable(err)
	}
	return reply
}

// Unwatch forgets every WATCH.
func (t *Tx) Unwatch() []byte {
	t.unpin(false)
	t.lostWatch = false
	if !t.multi {
		t.slot, t.addr = -1, ""
	}
	return []byte("+OK\r\n")
}

// reset ends the transaction: after EXEC or DISCARD Redis has dropped its queue and WATCHes,
// so a pinned connection is clean and goes back to the spares.
func (t *Tx) reset() {
	t.unpin(t.open)
	t.multi, t.aborted, t.lostWatch, t.queue, t.slot, t.addr = false, false, false, nil, -1, ""
}

// SwitchProto moves the transaction to c, the sibling Cluster that speaks proto, after the
// client's HELLO: a WATCH stays, as in Redis, because its pinned connection says HELLO proto
// too. If that fails, the WATCH is lost, and the next EXEC answers as if a watched key had
// changed.
func (t *Tx) SwitchProto(ctx context.Context, c *Cluster, proto int) {
	t.c = c
	if t.pinned == nil {
		return
	}
	reply, err := t.send(ctx, [][]byte{[]byte("HELLO"), []byte(strconv.Itoa(proto))})
	if err != nil || len(reply) == 0 || reply[0] == '-' {
		t.unpin(false)
		t.lostWatch = true
	}
}

// unpin lets the pinned connection go: back to its node's spares when clean, else closed.
func (t *Tx) unpin(clean bool) {
	if t.pinned == nil {
		return
	}
	if clean && t.addr != "" {
		t.c.node(t.addr).release(t.pinned, true)
	} else {
		t.pinned.close()
	}
	t.pinned, t.open = nil, false
}

// Abort marks the open transaction as failed: EXEC will answer EXECABORT.
func (t *Tx) Abort() { t.aborted = true }

// Close releases a pinned connection; call it when the client goes.
func (t *Tx) Close() { t.unpin(false) }

// copyArgs copies a command whose arguments point into a buffer that will be reused.
func copyArgs(args [][]byte) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = append([]byte(nil), a...)
	}
	return out
}
