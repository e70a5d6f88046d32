package upstream

import (
	"context"
	"time"

	"seckill-proxy/internal/resp"
)

// A blocking command (BLPOP, BRPOP, BLMOVE, BZPOPMIN, XREAD BLOCK: every command Redis flags
// "blocking") runs on a connection of its own, so that one client's 30-second BLPOP delays
// nobody else's command. The connection is a spare (see spares), so that nothing is dialled in
// the command's path, and it is closed when the client goes, as Redis forgets a blocked client
// that leaves. A MOVED or ASK is followed on a connection of its own too.

// maxStartBlocking bounds the command StartBlocking writes in its caller's turn: a write that
// small to an idle connection never waits.
const maxStartBlocking = 64 << 10

// blocking runs a blocking command on a connection of its own and returns its reply.
func (c *Cluster) blocking(ctx context.Context, args, keys [][]byte) []byte {
	addr, refused := c.blockingAddr(ctx, keys)
	if refused != nil {
		return refused
	}
	bctx, cancel := c.blockContext(ctx, args)
	defer cancel()
	b := blockedOnOf(ctx)
	if b == nil {
		replies, err := c.node(addr).doOwn(bctx, &c.own, [][][]byte{args})
		if err != nil {
			return unavailable(err)
		}
		return c.redirectOwn(bctx, replies[0], args)
	}
	n := c.node(addr)
	cn, err := n.hold(bctx, &c.own)
	if err != nil {
		return unavailable(err)
	}
	stop := context.AfterFunc(bctx, func() { cn.nc.Close() })
	reply, err := cn.waitBlocking(bctx, b, addr, args)
	n.release(cn, stop() && err == nil)
	if err != nil {
		return unavailable(err)
	}
	return c.redirectOwn(bctx, reply, args)
}

// waitBlocking sends args, a blocking command, and reads its reply, with b telling where it
// waits meanwhile (for CLIENT UNBLOCK).
func (cn *conn) waitBlocking(ctx context.Context, b *BlockedOn, addr string, args [][]byte) ([]byte, error) {
	setDeadline(cn.nc, deadlineOf(ctx))
	cmd, askID := cn.blockingCommand(b, appendCommand(nil, args))
	if _, err := cn.nc.Write(cmd); err != nil {
		return nil, err
	}
	return cn.afterID(b, addr, askID)
}

// StartBlocking sends args, a blocking command, to its master at once on a spare connection,
// and returns how to wait for its reply: wait blocks until Redis answers, the command's own
// timeout has passed (with the command timeout and a second to spare), or ctx ends, which
// closes the connection (Redis then forgets the command). Called as the proxy reads the
// command, it puts the command in Redis before anything another client sends later, as Redis
// itself would order them. It never waits for the network: ok is false when the command cannot
// go at once (it is not a blocking command, the command table is not loaded, its keys span
// slots, no spare is idle, it is over 64 KiB), and Do serves it then. args may be reused once
// it returns.
func (c *Cluster) StartBlocking(ctx context.Context, args [][]byte) (wait func() []byte, ok bool) {
	t := c.info.Load()
	if t == nil || len(args) == 0 || len(args[0]) > 32 || !c.verified.Load() {
		return nil, false
	}
	var buf [32]byte
	name := string(resp.AppendLower(buf[:0], args[0]))
	ci := t.info[name]
	if ci == nil || !hasFlag(ci, "blocking") {
		return nil, false
	}
	keys := commandKeys(name, ci, args)
	if len(keys) == 0 || !sameSlot(keys) {
		return nil, false
	}
	cmd := appendCommand(nil, args)
	if len(cmd) > maxStartBlocking {
		return nil, false
	}
	addr, err := c.masterAddr(ctx, keys[0])
	if err != nil {
		return nil, false
	}
	n := c.node(addr)
	if !c.own.tryGet(addr) { // past a bound, or the master's not read yet: Do says which
		return nil, false
	}
	cn := n.takeSpare()
	if cn == nil {
		c.own.put(addr)
		return nil, false
	}
	cn.own, cn.ownAddr = &c.own, addr
	args = copyArgs(args)
	b := blockedOnOf(ctx)
	cmd, askID := cn.blockingCommand(b, cmd)
	_ = cn.nc.SetWriteDeadline(time.Now().Add(c.opt.Timeout))
	if _, err := cn.nc.Write(cmd); err != nil {
		n.release(cn, false)
		return func() []byte { return c.blocking(ctx, args, commandKeys(name, ci, args)) }, true
	}
	return func() []byte {
		bctx, cancel := c.blockContext(ctx, args)
		defer cancel()
		stop := context.AfterFunc(bctx, func() { cn.nc.Close() })
		setDeadline(cn.nc, deadlineOf(bctx))
		reply, err := cn.afterID(b, addr, askID)
		n.release(cn, stop() && err == nil)
		if err != nil {
			return unavailable(err)
		}
		return c.redirectOwn(bctx, reply, args)
	}, true
}

// blockingAddr is the master a blocking command goes to: its keys' (which must share a slot),
// the one server's, or any master's for a command without keys.
func (c *Cluster) blockingAddr(ctx context.Context, keys [][]byte) (string, []byte) {
	var addr string
	var err error
	switch {
	case c.opt.Standalone != "":
		addr = c.opt.Standalone
	case len(keys) == 0:
		addr, err = c.anyMaster(ctx)
	case !sameSlot(keys):
		return "", errorReply("CROSSSLOT Keys in request don't hash to the same slot")
	default:
		addr, err = c.masterAddr(ctx, keys[0])
	}
	if err != nil {
		return "", unavailable(err)
	}
	return addr, nil
}

// sameSlot: every key hashes to the first's slot.
func sameSlot(keys [][]byte) bool {
	for _, k := range keys[1:] {
		if Slot(k) != Slot(keys[0]) {
			return false
		}
	}
	return true
}

// redirectOwn follows a MOVED or ASK reply to a blocking command on connections of its own,
// as redirect does on the shared ones (where a blocked command would hold up everyone's).
func (c *Cluster) redirectOwn(ctx context.Context, reply []byte, args [][]byte) []byte {
	return c.redirectVia(ctx, reply, args, func(ctx context.Context, addr string, cmds [][][]byte) ([][]byte, error) {
		return c.node(addr).doOwn(ctx, &c.own, cmds)
	})
}
