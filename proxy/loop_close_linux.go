//go:build linux

package proxy

import (
	"net"
	"os"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// How a loop's clients leave it: closed, handed to a goroutine of their own, or drained and
// closed at shutdown.

func (l *loop) closeClient(c *client) {
	if c.closed {
		return
	}
	l.core.gone(c)
	l.s.replies.release(c)
	delete(l.clients, c.id)
	unix.Close(c.id)
	l.s.clients.Add(-1)
	if !c.busy {
		l.s.router.CloseSession(c.sess)
	}
}

// handOff gives a client that subscribes, with its session and what it sent that is not
// served yet, to a goroutine of its own, which serves it from then on.
func (l *loop) handOff(c *client) {
	l.core.gone(c)
	l.s.replies.release(c)
	delete(l.clients, c.id)
	// Out of epoll first: the registration follows the socket, which outlives this descriptor.
	// Should that fail, the loop ignores events on a descriptor it no longer knows.
	_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, c.id, nil)
	f := os.NewFile(uintptr(c.id), c.remote)
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		l.s.clients.Add(-1)
		l.s.router.CloseSession(c.sess)
		l.s.log.Warn("cannot hand a client over", zap.Error(err))
		return
	}
	c.sess.SetConn(nc.LocalAddr().String(), -1, func() { _ = nc.Close() })
	l.s.conns.Add(1)
	go l.s.serveConn(nc, c.sess, append([]byte(nil), c.rd.Pending()...))
}

// drain stops taking commands; what is in flight is still answered.
func (l *loop) drain() {
	l.post(func() {
		l.core.drain(func(mark func(*client)) {
			for _, c := range l.clients {
				mark(c)
			}
		})
	})
}

// stop closes every connection and ends the loop.
func (l *loop) stop() {
	if l.post(func() { l.stopping = true }) {
		<-l.done
	}
}

func (l *loop) closeAll() {
	l.mu.Lock()
	l.shut = true
	l.mu.Unlock()
	for _, c := range l.clients {
		l.closeClient(c)
	}
	for _, up := range l.core.ups {
		l.closeUp(up)
	}
	unix.Close(l.wake)
	unix.Close(l.ep)
}
