package upstream

import (
	"context"
	"net"
	"time"

	"seckill-proxy/internal/connect"
)

// Standalone is the address of the plain Redis server everything goes to, or "" in front of
// a cluster.
func (c *Cluster) Standalone() string { return c.opt.Standalone }

// Direct returns the node to which Do would send args, as they are, passing its reply back
// untouched ("" when Do would not), and the slot of its keys in front of a cluster: no reply
// made here (unknown before the command table is loaded), no special handling (blocking
// commands, DBSIZE, SCAN, SCRIPT, keys over several slots), and in front of a cluster, keys to
// route by. A server
// that forwards such commands itself, and follows a MOVED or ASK reply with Redirect, gives
// the client the same replies as Do. It does not wait for the network.
func (c *Cluster) Direct(args [][]byte) (addr string, slot uint16) {
	t := c.info.Load()
	if t == nil || len(args) == 0 {
		return "", 0
	}
	return c.directAddr(c.plan(context.Background(), t, args))
}

// DirectOf is Direct for args as Describe described it (d): a command routed plainly by its
// keys is routed from d, its command and keys not looked up again.
func (c *Cluster) DirectOf(args [][]byte, d Description) (addr string, slot uint16) {
	if d.plain.ci == nil {
		return c.Direct(args)
	}
	return c.directAddr(c.planDescribed(context.Background(), nil, args, d))
}

// directAddr is the node a command planned as p goes to as it is ("" for none).
func (c *Cluster) directAddr(p plan) (string, uint16) {
	switch {
	case p.reply != nil || p.special != nil:
		return "", 0
	case p.anyMaster:
		return c.opt.Standalone, 0 // in front of a cluster, finding a master may wait: not direct
	}
	return p.addr, p.slot
}

// LoadCommands loads Redis's COMMAND INFO if it is not loaded yet; Direct answers "" until it
// is.
func (c *Cluster) LoadCommands(ctx context.Context) error {
	_, err := c.commands(func() context.Context { return ctx })
	return err
}

// Dial opens a connection to the node at addr, logged in as the shared lanes' connections
// are, with nothing left unread.
func (c *Cluster) Dial(ctx context.Context, addr string) (net.Conn, error) {
	cn, err := c.node(addr).dial(ctx)
	if err != nil {
		return nil, err
	}
	return cn.nc, nil
}

// DialOwner opens a connection to the node at addr logged in as the proxy's own user, which
// may write the sales' keys: for the proxy's own calls (an event loop's buy scripts), never
// for a client's command.
func (c *Cluster) DialOwner(ctx context.Context, addr string) (net.Conn, error) {
	cn, err := dialConn(ctx, addr, c.opt.dialer(), authCommand(c.opt.OwnerUsername, c.opt.OwnerPassword))
	if err != nil {
		return nil, err
	}
	return cn.nc, nil
}

// IsRedirect reports whether a raw reply is MOVED or ASK.
func IsRedirect(reply []byte) bool { return isRedirect(reply) }

// Redirect follows a MOVED or ASK reply to args as Do does, and returns the final reply.
func (c *Cluster) Redirect(ctx context.Context, reply []byte, args [][]byte) []byte {
	return c.redirect(ctx, reply, args)
}

// Unavailable is the reply to a command that could not reach Redis because of err.
func Unavailable(err error) []byte { return unavailable(err) }

// Timeout is how long a command may wait for Redis.
func (c *Cluster) Timeout() time.Duration { return c.opt.Timeout }

// OwnerLanes is how many buy connections a core may open to each master (at least 1).
func (c *Cluster) OwnerLanes() int { return max(1, c.opt.OwnerLanes) }

// DialTimeout bounds connecting (and logging in) to a node.
func (c *Cluster) DialTimeout() time.Duration { return c.opt.DialTimeout }

// dialer dials the nodes as o says: the address map, TLS.
func (o Options) dialer() connect.Dialer {
	return connect.Dialer{Timeout: o.DialTimeout, Map: o.AddressMap, TLS: o.TLS, Err: o.TLSErr}
}
