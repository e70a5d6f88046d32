package proxy

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Connections to Redis that the loop cannot poll. A TLS connection (redis.tls) is Go's to
// read and write: its socket carries records, not the commands. The loop keeps such a node's
// connection as a net.Conn, as the buy shell does: a reader goroutine reads it and posts what
// came to the loop, which hands it to the core as a socket's bytes; a writer goroutine writes
// what the loop hands it, one buffer at a time, with upstream's timeout as the deadline, so
// the loop itself never waits on it. Everything else (the core, its nodes' states, the buys,
// the deadlines) is the same as for a plain socket. Measured in docs/ARCHITECTURE.md
// "Transport security".

// loopConn is a node's connection kept as a net.Conn.
type loopConn struct {
	nc      net.Conn
	gone    bool        // closed: what its goroutines post is ignored
	writing bool        // a buffer is with the writer
	spare   []byte      // the last buffer the writer gave back, for the next
	writes  chan []byte // to the writer; at most one buffer in it
}

// dialedConn takes a new connection to up's node that has no socket of the loop's.
func (l *loop) dialedConn(up *node, nc net.Conn) {
	if l.stopping {
		_ = nc.Close()
		return
	}
	lc := &loopConn{nc: nc, writes: make(chan []byte, 1)}
	l.upConns[up] = lc
	timeout := l.core.lim.timeout
	go l.readConn(up, lc)
	go l.writeConn(up, lc, timeout)
	l.core.upConnected(up)
}

// sendConn hands what the core holds for up's node to its writer, unless it is writing.
func (l *loop) sendConn(up *node, lc *loopConn) {
	if lc.writing || len(up.out) == 0 {
		return
	}
	buf := up.out
	up.out, lc.spare = lc.spare, nil
	lc.writing = true
	lc.writes <- buf
}

// writeConn writes what the loop hands it until the connection is closed.
func (l *loop) writeConn(up *node, lc *loopConn, timeout time.Duration) {
	for buf := range lc.writes {
		_ = lc.nc.SetWriteDeadline(time.Now().Add(timeout))
		_, err := lc.nc.Write(buf)
		if !l.post(func() {
			lc.writing = false
			switch {
			case lc.gone:
			case err != nil:
				l.connFailed(up, lc, err)
			default:
				lc.spare = buf[:0]
				l.sendConn(up, lc)
			}
		}) {
			return
		}
	}
}

// readConn reads up's node until its connection ends, and gives the core what came.
func (l *loop) readConn(up *node, lc *loopConn) {
	buf := make([]byte, loopReadSize)
	taken := make(chan struct{}, 1)
	for {
		n, err := lc.nc.Read(buf)
		if n > 0 {
			data := buf[:n]
			if !l.post(func() {
				defer func() { taken <- struct{}{} }()
				if lc.gone {
					return
				}
				up.in = append(up.in, data...)
				l.core.upRead(up)
				if !up.connected {
					l.closeUp(up)
				}
			}) {
				return
			}
			select { // buf is read into again only once the core has copied it
			case <-taken:
			case <-l.done:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				l.post(func() { l.connFailed(up, lc, err) })
			}
			return
		}
	}
}

// connFailed: lc's connection to up's node broke.
func (l *loop) connFailed(up *node, lc *loopConn, err error) {
	if lc.gone {
		return
	}
	l.core.upFailed(up, fmt.Errorf("redis %s: %w", up.addr, err), unavailLost)
	l.closeUp(up)
}

// closeConn closes up's net.Conn connection, if it has one; its goroutines end.
func (l *loop) closeConn(up *node) bool {
	lc := l.upConns[up]
	if lc == nil {
		return false
	}
	delete(l.upConns, up)
	lc.gone = true
	close(lc.writes)
	_ = lc.nc.Close()
	return true
}
