package upstream

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/internal/coalesce"
)

// maxCoalesce is the most commands one shared upstream write carries.
const maxCoalesce = 1024

// call is one client batch's commands for one node, in the client's order. A call is never
// split, so one client's commands run in the order it sent them.
type call struct {
	cmds     [][][]byte
	replies  [][]byte
	err      error
	deadline time.Time
	done     chan struct{}
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// lanes are a node's shared connections: each lane is one goroutine with one connection that
// takes every call waiting (up to maxCoalesce commands), writes them in one go, and reads the
// replies back, so that under load many clients share each write and read.
type lanes struct {
	n     *node
	calls chan *call
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newLanes(n *node, count int) *lanes {
	l := &lanes{n: n, calls: make(chan *call, 4096), stop: make(chan struct{})}
	for range count {
		l.wg.Go(l.run)
	}
	return l
}

// do sends cmds through a lane and waits for the replies, until deadline at the latest
// (zero: ctx's deadline, if any). ctx ends the wait for a lane, not a call already sent.
func (l *lanes) do(ctx context.Context, deadline time.Time, cmds [][][]byte) ([][]byte, error) {
	cl := callPool.Get().(*call)
	cl.cmds, cl.replies, cl.err = cmds, nil, nil
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	cl.deadline = deadline
	select {
	case l.calls <- cl:
	case <-ctx.Done():
		callPool.Put(cl)
		return nil, ctx.Err()
	}
	<-cl.done
	replies, err := cl.replies, cl.err
	cl.cmds, cl.replies = nil, nil
	callPool.Put(cl)
	return replies, err
}

func (l *lanes) run() {
	var c *conn
	defer func() {
		if c != nil {
			c.nc.Close()
		}
	}()
	var batch []*call
	var cmds [][][]byte
	for {
		var ok bool
		if batch, ok = coalesce.Gather(l.stop, l.calls, batch, maxCoalesce, func(cl *call) int { return len(cl.cmds) }); !ok {
			return
		}
		deadline := time.Now().Add(time.Minute)
		cmds = cmds[:0]
		for _, cl := range batch {
			if !cl.deadline.IsZero() && cl.deadline.Before(deadline) {
				deadline = cl.deadline
			}
			cmds = append(cmds, cl.cmds...)
		}
		var replies [][]byte
		var err error
		c, replies, err = l.send(c, deadline, cmds)
		at := 0
		for _, cl := range batch {
			if err != nil {
				cl.err = err
			} else {
				cl.replies = replies[at : at+len(cl.cmds)]
			}
			at += len(cl.cmds)
			cl.done <- struct{}{}
		}
	}
}

// send sends cmds on c (dialled if nil) and reads their replies: the connection to keep (nil
// after an error), and the replies or the error. A connection the node closed while it idled
// (a restart) is not handed back as an error: the batch never reached Redis, and goes once
// more on a new connection.
func (l *lanes) send(c *conn, deadline time.Time, cmds [][][]byte) (*conn, [][]byte, error) {
	for try := 0; ; try++ {
		reused := c != nil
		if c == nil {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			var err error
			c, err = l.n.dial(ctx)
			cancel()
			if err != nil {
				return nil, nil, err
			}
		}
		// No context here: a timer per batch costs more than the rest of the lane's work.
		replies, err := c.roundTripUntil(deadline, cmds)
		if err == nil {
			return c, replies, nil
		}
		c.nc.Close()
		c = nil
		if try > 0 || !reused || !neverReached(err) {
			return nil, nil, err
		}
		l.n.staleLog.Do(func() {
			l.n.log.Warn("a connection to a Redis node was closed while idle; sending on a new one (logged at most once a minute)", zap.String("addr", l.n.addr), zap.Error(err))
		})
	}
}

// neverReached: err is a write that failed (a broken pipe, a reset) or a connection closed
// before any reply came, on a connection Redis had closed before: the commands never ran.
func neverReached(err error) bool {
	var ne *net.OpError
	switch {
	case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET):
		return true
	case errors.As(err, &ne) && ne.Op == "write":
		return true
	}
	return errors.Is(err, errNoReply)
}

func (l *lanes) close() {
	close(l.stop)
	l.wg.Wait()
}
