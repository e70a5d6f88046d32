package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/resp"
)

// node is one Redis server: a few shared connections (lanes) for ordinary commands, and a
// dialer for connections of their own.
type node struct {
	addr   string
	dial   func(ctx context.Context) (*conn, error)
	lanes  *lanes
	spares spares
	// log says when a lane's connection was found closed while idle, at most once a minute.
	log      *zap.Logger
	staleLog rate.Sometimes
}

type conn struct {
	nc   net.Conn
	r    *bufio.Reader
	scan resp.ReplyScanner // reads r's replies; kept so that reading allocates nothing
	wbuf []byte            // the last write, reused
	// own is the bound this connection holds a slot of (see hold), on the node at ownAddr;
	// nil: none.
	own     *ownSlots
	ownAddr string
	// id is the connection's CLIENT ID in Redis, once a blocking command asked (0: not known).
	id int64
}

// errNoReply is a connection closed before the first reply of a write came: on a connection
// that idled, the node closed it before the write (a restart), and nothing ran.
var errNoReply = errors.New("the connection closed before any reply")

func newNode(addr string, lanes int, dialer connect.Dialer, auth [][]byte, spareConns int, spareTimeout time.Duration, log *zap.Logger) *node {
	if log == nil {
		log = zap.NewNop()
	}
	n := &node{addr: addr, spares: spares{want: spareConns, timeout: spareTimeout}, log: log, staleLog: rate.Sometimes{Interval: time.Minute}}
	n.dial = func(ctx context.Context) (*conn, error) { return dialConn(ctx, addr, dialer, auth) }
	n.lanes = newLanes(n, lanes)
	return n
}

// dialConn connects to addr and, with auth, logs in.
func dialConn(ctx context.Context, addr string, dialer connect.Dialer, auth [][]byte) (*conn, error) {
	nc, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
	if auth != nil {
		replies, err := c.roundTrip(ctx, [][][]byte{auth})
		if err != nil {
			nc.Close()
			return nil, err
		}
		if len(replies[0]) > 0 && replies[0][0] == '-' {
			nc.Close()
			return nil, &replyError{string(replies[0][1 : len(replies[0])-2])}
		}
	}
	// The login's deadline was the dial's: a connection outlives it (a subscriber's for as
	// long as its client holds it), and each round trip sets a deadline of its own.
	_ = nc.SetDeadline(time.Time{})
	return c, nil
}

// loginCommand is what a new connection sends first: for RESP3, HELLO 3 with the user's
// AUTH if there is one; else authCommand.
func loginCommand(proto int, user, password string) [][]byte {
	if proto != 3 {
		return authCommand(user, password)
	}
	hello := [][]byte{[]byte("HELLO"), []byte("3")}
	if user != "" || password != "" {
		if user == "" {
			user = "default"
		}
		hello = append(hello, []byte("AUTH"), []byte(user), []byte(password))
	}
	return hello
}

// authCommand is the AUTH that logs user (or the default user, with user empty) in; nil
// with neither a user nor a password.
func authCommand(user, password string) [][]byte {
	switch {
	case user != "":
		return [][]byte{[]byte("AUTH"), []byte(user), []byte(password)}
	case password != "":
		return [][]byte{[]byte("AUTH"), []byte(password)}
	}
	return nil
}

type replyError struct{ msg string }

func (e *replyError) Error() string { return e.msg }

// do sends cmds through the node's shared lanes and returns their raw replies in order.
func (n *node) do(ctx context.Context, cmds [][][]byte) ([][]byte, error) {
	return n.lanes.do(ctx, time.Time{}, cmds)
}

// doUntil is do with a deadline of its own besides ctx's.
func (n *node) doUntil(ctx context.Context, deadline time.Time, cmds [][][]byte) ([][]byte, error) {
	return n.lanes.do(ctx, deadline, cmds)
}

// doOwn sends cmds on a connection of their own (a spare, or one dialled now): for blocking
// commands, which must not hold up anyone else, and transactions. When ctx ends first (the
// client has gone), the connection is closed at once, and Redis forgets the blocked command
// with it, as it does when its own client goes: a BLPOP then takes no element that nobody
// would receive. Once every reply is read, the connection is clean and goes back to the
// spares.
func (n *node) doOwn(ctx context.Context, own *ownSlots, cmds [][][]byte) ([][]byte, error) {
	c, err := n.hold(ctx, own)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.nc.Close() })
	replies, err := c.roundTrip(ctx, cmds)
	n.release(c, stop() && err == nil)
	return replies, err
}

func (c *conn) roundTrip(ctx context.Context, cmds [][][]byte) ([][]byte, error) {
	return c.roundTripUntil(deadlineOf(ctx), cmds)
}

// roundTripUntil writes cmds and reads one reply per command, all before deadline. The
// replies share one buffer, so a batch costs a few allocations, not a few per reply.
func (c *conn) roundTripUntil(deadline time.Time, cmds [][][]byte) ([][]byte, error) {
	setDeadline(c.nc, deadline)
	buf := c.wbuf[:0]
	for _, cmd := range cmds {
		buf = appendCommand(buf, cmd)
	}
	if cap(buf) <= 1<<20 { // a huge write is not kept for the next one
		c.wbuf = buf
	}
	if _, err := c.nc.Write(buf); err != nil {
		return nil, err
	}
	out := make([][]byte, len(cmds))
	ends := make([]int, len(cmds))
	var all []byte
	for i := range cmds {
		var err error
		if all, err = c.scan.Append(c.r, all); err != nil {
			if i == 0 && len(all) == 0 && errors.Is(err, io.EOF) {
				err = errNoReply
			}
			return nil, err
		}
		ends[i] = len(all)
	}
	start := 0
	for i, end := range ends {
		out[i] = all[start:end:end]
		start = end
	}
	return out, nil
}

func (n *node) close() {
	n.closeSpares()
	n.lanes.close()
}
