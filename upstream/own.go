package upstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/singleflight"

	"seckill-proxy/internal/resp"
)

// Connections of their own: a blocking command, a transaction (from WATCH or MULTI to EXEC)
// and a subscriber each hold a connection to a master that nobody else may use while they
// last. Redis caps every node's connections (maxclients), and a node at its cap refuses
// everyone: other sidecars, the proxies' own new connections, an operator's redis-cli. So one
// proxy's held connections are bounded, in all (Options.MaxOwn) and on each master (a share of
// the node's maxclients, read once per node with the proxy's own user), and one past either
// bound is refused with BUSY before anything is dialled.

// defaultMaxClients is Redis's maxclients, taken for a node whose own could not be read.
const defaultMaxClients = 10000

// ErrTooManyOwn refuses a connection of its own past a bound: the proxy's (MaxOwn) or the
// master's (OwnShare of its maxclients). Its text is the client's error reply.
type ErrTooManyOwn struct {
	Limit   int
	PerNode bool
}

func (e *ErrTooManyOwn) Error() string {
	if e.PerNode {
		return fmt.Sprintf("BUSY %d blocking commands, transactions and subscriptions through this proxy hold connections to this master already (redis.own_conns_share of its maxclients); try again later", e.Limit)
	}
	return fmt.Sprintf("BUSY %d blocking commands, transactions and subscriptions through this proxy hold connections of their own already (redis.max_own_conns); try again later", e.Limit)
}

// ownSlots counts the held connections, in all and per master. Safe for concurrent use; a
// zero max means no bound.
type ownSlots struct {
	max   int
	share float64
	// maxClients reads a node's maxclients (nil: defaultMaxClients).
	maxClients func(ctx context.Context, addr string) (int, error)

	mu      sync.Mutex
	total   int
	perNode map[string]int
	caps    map[string]int // each node's bound, once read
	reads   singleflight.Group
	refused atomic.Int64
}

// get takes a slot on addr, or says why not. It may read addr's maxclients first.
func (o *ownSlots) get(ctx context.Context, addr string) error {
	limit := o.capOf(ctx, addr)
	o.mu.Lock()
	defer o.mu.Unlock()
	err := o.take(addr, limit)
	if err != nil {
		o.refused.Add(1)
	}
	return err
}

// tryGet takes a slot on addr without waiting for anything: false past a bound, or while
// addr's maxclients is not read yet.
func (o *ownSlots) tryGet(addr string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	limit, ok := o.caps[addr]
	if !ok && o.share > 0 {
		return false
	}
	return o.take(addr, limit) == nil
}

// take takes a slot within max and limit (addr's cap; 0: none); o.mu is held.
func (o *ownSlots) take(addr string, limit int) error {
	switch {
	case o.max > 0 && o.total >= o.max:
		return &ErrTooManyOwn{Limit: o.max}
	case limit > 0 && o.perNode[addr] >= limit:
		return &ErrTooManyOwn{Limit: limit, PerNode: true}
	}
	if o.perNode == nil {
		o.perNode = map[string]int{}
	}
	o.total++
	o.perNode[addr]++
	return nil
}

// put gives back a slot on addr.
func (o *ownSlots) put(addr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.total--
	if o.perNode[addr]--; o.perNode[addr] <= 0 {
		delete(o.perNode, addr)
	}
}

// capOf is addr's bound: OwnShare of its maxclients (at least 1), read on first need; 0: no
// bound.
func (o *ownSlots) capOf(ctx context.Context, addr string) int {
	if o.share <= 0 {
		return 0
	}
	o.mu.Lock()
	limit, ok := o.caps[addr]
	o.mu.Unlock()
	if ok {
		return limit
	}
	// One read per node however many callers need it at once (the blocked clients of a
	// master just promoted, reconnecting together).
	v, _, _ := o.reads.Do(addr, func() (any, error) {
		// A caller that missed the cache just before another flight stored it starts a flight
		// of its own after that one ended: it finds the value here.
		o.mu.Lock()
		cached, ok := o.caps[addr]
		o.mu.Unlock()
		if ok {
			return cached, nil
		}
		n := defaultMaxClients
		if o.maxClients != nil {
			if m, err := o.maxClients(ctx, addr); err == nil && m > 0 {
				n = m
			}
		}
		capped := max(1, int(o.share*float64(n)))
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.caps == nil {
			o.caps = map[string]int{}
		}
		o.caps[addr] = capped
		return capped, nil
	})
	return v.(int)
}

// held is the number of connections held now.
func (o *ownSlots) held() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

// nodeMaxClients reads addr's maxclients as the proxy's own user (CONFIG is an admin command,
// which the pass-through user may not run).
func (c *Cluster) nodeMaxClients(ctx context.Context, addr string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opt.DialTimeout+c.opt.Timeout)
	defer cancel()
	cn, err := dialConn(ctx, addr, c.opt.dialer(), authCommand(c.opt.OwnerUsername, c.opt.OwnerPassword))
	if err != nil {
		return 0, err
	}
	defer cn.nc.Close()
	deadline, _ := ctx.Deadline()
	replies, err := cn.roundTripUntil(deadline, [][][]byte{{[]byte("CONFIG"), []byte("GET"), []byte("maxclients")}})
	if err != nil {
		return 0, err
	}
	v, err := resp.Decode(replies[0])
	if err != nil {
		return 0, err
	}
	pair, _ := v.([]any)
	if len(pair) != 2 {
		return 0, errors.New("CONFIG GET maxclients: an unexpected reply")
	}
	n, _ := pair[1].(string)
	return strconv.Atoi(n)
}

// hold takes a connection of the caller's own to the node (see take), within the bounds on
// held connections; release (or conn.close) gives its slot back.
func (n *node) hold(ctx context.Context, own *ownSlots) (*conn, error) {
	if err := own.get(ctx, n.addr); err != nil {
		return nil, err
	}
	c, err := n.take(ctx)
	if err != nil {
		own.put(n.addr)
		return nil, err
	}
	c.own, c.ownAddr = own, n.addr
	return c, nil
}

// free gives back the connection's slot among the held ones, if it holds one.
func (c *conn) free() {
	if c.own != nil {
		c.own.put(c.ownAddr)
		c.own = nil
	}
}

// close closes the connection, giving back its slot.
func (c *conn) close() {
	c.free()
	_ = c.nc.Close()
}

// OwnConns is how many connections blocking commands, transactions and subscribers hold now,
// and how many were refused past a bound since the start.
func (c *Cluster) OwnConns() (held int, refused int64) { return c.own.held(), c.own.refused.Load() }
