package upstream

import (
	"context"
	"strconv"
	"strings"

	"seckill-proxy/internal/resp"
)

// Tx is one client connection's transaction state: MULTI ... EXEC and WATCH, pinned to the
// master that owns the transaction's slot. Commands are checked and queued here ("+QUEUED"),
// and EXEC sends MULTI, the queue and EXEC in one round trip on one connection, so Redis runs
// them atomically. WATCH opens a connection of the client's own to that master, kept until
// EXEC, DISCARD or UNWATCH. A Tx is used by its connection's goroutine only.
type Tx struct {
	c       *Cluster
	multi   bool
	aborted bool
	queue   [][][]byte
	slot    int // -1: no key yet
	addr    string
	watch   *conn // the pinned connection, after WATCH
	// lostWatch: a WATCH was dropped other than by EXEC, DISCARD or UNWATCH (its connection
	// failed a protocol switch), so the next EXEC must not run the queue unwatched.
	lostWatch bool
}

// NewTx returns the transaction state of a new client connection.
func (c *Cluster) NewTx() *Tx { return &Tx{c: c, slot: -1} }

// Active reports whether a MULTI is open: then every command goes to Queue.
func (t *Tx) Active() bool { return t.multi }

// Multi opens a transaction.
func (t *Tx) Multi() []byte {
	if t.multi {
		return errorReply("ERR MULTI calls can not be nested")
	}
	t.multi, t.aborted, t.queue = true, false, nil
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

// Queue checks a command inside MULTI and queues it.
func (t *Tx) Queue(ctx context.Context, args [][]byte) []byte {
	table, err := t.c.commands(func() context.Context { return ctx })
	if err != nil {
		t.aborted = true
		return unavailable(err)
	}
	name := strings.ToLower(string(args[0]))
	switch ci := table.info[name]; {
	case ci == nil:
		t.aborted = true
		return errorReply(resp.UnknownCommand(args))
	case (ci.Arity > 0 && len(args) != int(ci.Arity)) || (ci.Arity < 0 && len(args) < -int(ci.Arity)):
		t.aborted = true
		return errorReply(resp.WrongArity(name))
	}
	if name == "watch" {
		t.aborted = true
		return errorReply("ERR Command not allowed inside a transaction")
	}
	// What the proxy serves specially outside MULTI (a blocking command, DBSIZE, SCAN, a
	// split across slots) goes to the transaction's master as it is, as Redis runs it there:
	// a blocking command does not block, DBSIZE and SCAN see that master, keys must share
	// the slot. Refusals stay refusals.
	if p := t.c.plan(ctx, table, args); p.reply != nil {
		t.aborted = true
		return p.reply
	}
	if r := t.bind(ctx, commandKeys(name, table.info[name], args)); r != nil {
		t.aborted = true
		return r
	}
	t.queue = append(t.queue, copyArgs(args)) // args are the caller's only until Queue returns
	return []byte("+QUEUED\r\n")
}

// Exec runs the queue atomically on the transaction's master and returns EXEC's reply.
func (t *Tx) Exec(ctx context.Context) []byte {
	if !t.multi {
		return errorReply("ERR EXEC without MULTI")
	}
	defer t.reset()
	if t.aborted {
		return errorReply("EXECABORT Transaction discarded because of previous errors.")
	}
	if t.lostWatch {
		return []byte("*-1\r\n") // as Redis answers a transaction whose watched keys changed
	}
	if t.addr == "" {
		addr, err := t.c.anyMaster(ctx)
		if err != nil {
			return unavailable(err)
		}
		t.addr = addr
	}
	cmds := append([][][]byte{{[]byte("MULTI")}}, t.queue...)
	cmds = append(cmds, [][]byte{[]byte("EXEC")})
	var replies [][]byte
	var err error
	if t.watch != nil {
		replies, err = t.watch.roundTrip(ctx, cmds)
	} else {
		replies, err = t.c.node(t.addr).doOwn(ctx, cmds)
	}
	if err != nil {
		return unavailable(err)
	}
	return replies[len(replies)-1]
}

// Discard drops the queue and any WATCH.
func (t *Tx) Discard() []byte {
	if !t.multi {
		return errorReply("ERR DISCARD without MULTI")
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
	if t.watch == nil {
		c, err := t.c.node(t.addr).dial(ctx)
		if err != nil {
			return unavailable(err)
		}
		t.watch = c
	}
	replies, err := t.watch.roundTrip(ctx, [][][]byte{args})
	if err != nil {
		t.unpin()
		return unavailable(err)
	}
	return replies[0]
}

// Unwatch forgets every WATCH.
func (t *Tx) Unwatch() []byte {
	t.unpin()
	t.lostWatch = false
	if !t.multi {
		t.slot, t.addr = -1, ""
	}
	return []byte("+OK\r\n")
}

func (t *Tx) reset() {
	t.unpin()
	t.multi, t.aborted, t.lostWatch, t.queue, t.slot, t.addr = false, false, false, nil, -1, ""
}

// SwitchProto moves the transaction to c, the sibling Cluster that speaks proto, after the
// client's HELLO: a WATCH stays, as in Redis, because its pinned connection says HELLO proto
// too. If that fails, the WATCH is lost, and the next EXEC answers as if a watched key had
// changed.
func (t *Tx) SwitchProto(ctx context.Context, c *Cluster, proto int) {
	t.c = c
	if t.watch == nil {
		return
	}
	replies, err := t.watch.roundTrip(ctx, [][][]byte{{[]byte("HELLO"), []byte(strconv.Itoa(proto))}})
	if err != nil || len(replies) != 1 || len(replies[0]) == 0 || replies[0][0] == '-' {
		t.unpin()
		t.lostWatch = true
	}
}

func (t *Tx) unpin() {
	if t.watch != nil {
		t.watch.nc.Close()
		t.watch = nil
	}
}

// Abort marks the open transaction as failed: EXEC will answer EXECABORT.
func (t *Tx) Abort() { t.aborted = true }

// Close releases a pinned connection; call it when the client goes.
func (t *Tx) Close() { t.unpin() }

// copyArgs copies a command whose arguments point into a buffer that will be reused.
func copyArgs(args [][]byte) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = append([]byte(nil), a...)
	}
	return out
}
