package upstream

import (
	"context"
	"net"
	"time"
)

// Standalone is the address of the plain Redis server everything goes to, or "" in front of
// a cluster.
func (c *Cluster) Standalone() string { return c.opt.Standalone }

// Direct reports whether Do would send args, as they are, to the standalone server and pass
// its reply back untouched: no reply made here (refused, protected keys, unknown before the
// command table is loaded), no special handling (blocking commands, DBSIZE, SCAN, SCRIPT).
// A server that forwards such commands itself gives the client the same replies as Do.
func (c *Cluster) Direct(args [][]byte, admin bool) bool {
	t := c.info.Load()
	if c.opt.Standalone == "" || t == nil || len(args) == 0 {
		return false
	}
	p := c.plan(context.Background(), t, args, admin)
	return p.reply == nil && p.special == nil && p.addr == c.opt.Standalone
}

// LoadCommands loads Redis's COMMAND INFO if it is not loaded yet; Direct answers false until
// it is.
func (c *Cluster) LoadCommands(ctx context.Context) error {
	_, err := c.commands(func() context.Context { return ctx })
	return err
}

// DialStandalone opens a connection to the standalone server, logged in as the shared lanes'
// connections are, with nothing left unread.
func (c *Cluster) DialStandalone(ctx context.Context) (net.Conn, error) {
	cn, err := c.node(c.opt.Standalone).dial(ctx)
	if err != nil {
		return nil, err
	}
	return cn.nc, nil
}

// Unavailable is the reply to a command that could not reach Redis because of err.
func Unavailable(err error) []byte { return unavailable(err) }

// Timeout is how long a batch may wait for Redis.
func (c *Cluster) Timeout() time.Duration { return c.opt.Timeout }
