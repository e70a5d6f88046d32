package upstream

import (
	"context"
	"errors"
	"sync"
	"time"
)

// spares are a node's connections dialled ahead of need, logged in and idle, for the commands
// that take a connection of their own: blocking commands, transactions and WATCH. Taking one
// dials nothing in the request's path, so such a command reaches Redis as soon as the proxy
// has read it, before the commands other clients send after it (see StartBlocking). A taken
// spare is the taker's to close; the node dials a new one in the background. It is safe for
// concurrent use; the zero value keeps none.
type spares struct {
	want    int
	timeout time.Duration // bounds one background dial and its login
	mu      sync.Mutex
	idle    []*conn
	filling bool
	closed  bool
}

// take returns a connection of the caller's own to the node: a spare when one is idle and
// still open, else a new one dialled now.
func (n *node) take(ctx context.Context) (*conn, error) {
	if c := n.takeSpare(); c != nil {
		return c, nil
	}
	return n.dial(ctx)
}

// takeSpare returns an idle spare that is still open, or nil, without waiting, and starts
// dialling its replacement.
func (n *node) takeSpare() *conn {
	s := &n.spares
	var c *conn
	s.mu.Lock()
	for len(s.idle) > 0 && c == nil {
		c = s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if !open(c.nc) { // the server closed it while it waited (a restart, its timeout)
			c.nc.Close()
			c = nil
		}
	}
	s.mu.Unlock()
	n.refill()
	return c
}

// release gives back a taken connection: to the spares when it is clean (every reply read,
// nothing left to it of the command's) and a spare is missing, else closed.
func (n *node) release(c *conn, clean bool) {
	c.free()
	s := &n.spares
	s.mu.Lock()
	if clean && !s.closed && len(s.idle) < s.want {
		s.idle = append(s.idle, c)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	c.nc.Close()
}

// refill dials spares on a goroutine until the node has want idle; a failed dial stops it
// until the next take (a node that is down is not dialled in a loop).
func (n *node) refill() {
	s := &n.spares
	s.mu.Lock()
	if s.want == 0 || s.filling || s.closed || len(s.idle) >= s.want {
		s.mu.Unlock()
		return
	}
	s.filling = true
	s.mu.Unlock()
	go func() {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
			c, err := n.dial(ctx)
			cancel()
			s.mu.Lock()
			if err != nil || s.closed {
				s.filling = false
				s.mu.Unlock()
				if c != nil {
					c.nc.Close()
				}
				return
			}
			s.idle = append(s.idle, c)
			if len(s.idle) >= s.want {
				s.filling = false
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
		}
	}()
}

// closeSpares closes the idle spares, and stops making more.
func (n *node) closeSpares() {
	s := &n.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.idle {
		c.nc.Close()
	}
	s.idle = nil
}

// WarmSpares dials the spare connections (redis.spare_conns) of every master, or of the one
// server, and returns once each has them or ctx ends, so that the first blocking command or
// transaction finds one. Nodes met later get theirs at their first such command.
func (c *Cluster) WarmSpares(ctx context.Context) error {
	ms, err := c.masters(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ms))
	for i, m := range ms {
		wg.Go(func() {
			c.own.capOf(ctx, m) // each master's maxclients, read before the first client needs it
			errs[i] = c.node(m).fill(ctx)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fill dials spares until the node has want idle, and waits for them.
func (n *node) fill(ctx context.Context) error {
	s := &n.spares
	for {
		s.mu.Lock()
		if s.closed || len(s.idle) >= s.want {
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		c, err := n.dial(ctx)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.nc.Close()
			return nil
		}
		s.idle = append(s.idle, c)
		s.mu.Unlock()
	}
}
