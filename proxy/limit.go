package proxy

import (
	"errors"
	"net"
	"strconv"
	"sync/atomic"
)

// errRequestTooLarge ends a connection whose client sent more than the bound without
// completing a command.
var errRequestTooLarge = errors.New("request too large")

// limitedListener hands out connections that bound how much a client may send before the
// server has a complete command from it: the RESP reader would otherwise grow with whatever
// a client declares and sends.
type limitedListener struct {
	net.Listener
	max int64
}

func (l limitedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &limitedConn{Conn: c, max: l.max}, nil
}

// limitedConn counts the bytes read since the handler last took commands from it.
type limitedConn struct {
	net.Conn
	max  int64
	used atomic.Int64
}

func (c *limitedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.used.Add(int64(n)) > c.max {
		_, _ = c.Conn.Write(tooLargeReply(c.max))
		return n, errRequestTooLarge
	}
	return n, err
}

// took tells the connection that the handler has taken what it had read.
func took(c net.Conn) {
	if lc, ok := c.(*limitedConn); ok {
		lc.used.Store(0)
	}
}

// tooLargeReply is the error a client gets before it is disconnected for sending more than max
// bytes without completing a command.
func tooLargeReply(max int64) []byte {
	return []byte("-ERR request of more than " + strconv.FormatInt(max, 10) +
		" bytes without a complete command (limits.max_arg_bytes); closing\r\n")
}
