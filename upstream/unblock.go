package upstream

import (
	"context"
	"strconv"
	"sync"

	"seckill-proxy/internal/resp"
)

// CLIENT UNBLOCK of a client of the proxy: its blocking command waits in Redis on a
// connection of its own, so the proxy asks Redis to unblock that connection, with Redis's own
// CLIENT UNBLOCK (as the proxy's own user: it is an admin command). Redis then answers the
// blocked command itself, the timeout's reply or -UNBLOCKED, and the proxy hands that back as
// any reply: nothing a BLPOP popped is lost, as it could be if the proxy closed the connection.

// BlockedOn is where one client's blocking command waits: the node, and the Redis-side ID of
// the connection. A session keeps one, and passes it in the context of its commands
// (WithBlockedOn); the zero value is ready.
type BlockedOn struct {
	mu   sync.Mutex
	addr string
	id   int64
}

type blockedOnKey struct{}

// WithBlockedOn returns ctx carrying b, which a blocking command sent with it then fills.
func WithBlockedOn(ctx context.Context, b *BlockedOn) context.Context {
	return context.WithValue(ctx, blockedOnKey{}, b)
}

func blockedOnOf(ctx context.Context) *BlockedOn {
	b, _ := ctx.Value(blockedOnKey{}).(*BlockedOn)
	return b
}

func (b *BlockedOn) set(addr string, id int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.addr, b.id = addr, id
	b.mu.Unlock()
}

// clientID is CLIENT ID, sent before a blocking command on a connection whose Redis-side ID is
// not known yet.
var clientID = [][]byte{[]byte("CLIENT"), []byte("ID")}

// blockingCommand is what a connection sends for cmd, a blocking command encoded: CLIENT ID
// first when b waits for it and the connection's ID is not known (0), pipelined, so that no
// round trip is added.
func (cn *conn) blockingCommand(b *BlockedOn, cmd []byte) ([]byte, bool) {
	if b == nil || cn.id != 0 {
		return cmd, false
	}
	return append(appendCommand(nil, clientID), cmd...), true
}

// afterID reads CLIENT ID's reply if it was asked (an error reply leaves the ID unknown: a
// user that may not run it), records where the command now waits, and reads the command's
// reply; b is cleared when it comes.
func (cn *conn) afterID(b *BlockedOn, addr string, askID bool) ([]byte, error) {
	if b == nil {
		return cn.scan.Append(cn.r, nil)
	}
	defer b.set("", 0)
	if askID {
		reply, err := cn.scan.Append(cn.r, nil)
		if err != nil {
			return nil, err
		}
		if v, err := resp.Decode(reply); err == nil {
			if id, ok := v.(int64); ok {
				cn.id = id
			}
		}
	}
	if cn.id != 0 {
		b.set(addr, cn.id)
	}
	return cn.scan.Append(cn.r, nil)
}

// Unblock asks Redis to unblock the blocking command that b waits on, as CLIENT UNBLOCK <id>
// <mode> (TIMEOUT or ERROR) would: Redis's reply (:1, or :0 when the command had its reply
// already), or :0 when b waits on nothing.
//
// b stays locked until Redis has answered: the blocked side clears b before it gives its
// connection back, so the connection cannot have gone to another client's command meanwhile.
func (c *Cluster) Unblock(ctx context.Context, b *BlockedOn, mode string) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	addr, id := b.addr, b.id
	if id == 0 {
		return []byte(":0\r\n")
	}
	ctx, cancel := context.WithTimeout(ctx, c.opt.DialTimeout+c.opt.Timeout)
	defer cancel()
	cn, err := dialConn(ctx, addr, c.opt.dialer(), authCommand(c.opt.OwnerUsername, c.opt.OwnerPassword))
	if err != nil {
		return unavailable(err)
	}
	defer cn.nc.Close()
	deadline, _ := ctx.Deadline()
	replies, err := cn.roundTripUntil(deadline, [][][]byte{{[]byte("CLIENT"), []byte("UNBLOCK"), []byte(strconv.FormatInt(id, 10)), []byte(mode)}})
	if err != nil {
		return unavailable(err)
	}
	return replies[0]
}
