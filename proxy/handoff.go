package proxy

import (
	"net"
	"sync"

	"seckill-proxy/router"
)

// handoffListener gives the redcon server connections that were served elsewhere until now
// (the event loop's subscribers).
type handoffListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	addr  net.Addr
}

func (l *handoffListener) give(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

// handedConn is a client connection handed over with its session and what it sent that was
// not served yet, which reads return first.
type handedConn struct {
	net.Conn
	prefix []byte
	sess   *router.Session
}

func (c *handedConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// handedOf returns the handed-over connection under nc, or nil.
func handedOf(nc net.Conn) *handedConn {
	if lc, ok := nc.(*limitedConn); ok {
		nc = lc.Conn
	}
	hc, _ := nc.(*handedConn)
	return hc
}
