//go:build linux

package proxy

import (
	"fmt"
	"net"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// acceptInto takes connections from ln and gives their sockets to the loops in turn, until
// the listener is closed.
func (s *Server) acceptInto(ln net.Listener, loops []*loop) {
	for next := 0; ; next++ {
		nc, ok := s.acceptOne(ln, false)
		if !ok {
			return
		}
		if nc == nil {
			continue
		}
		fd, err := socketOf(nc)
		remote, local := nc.RemoteAddr().String(), nc.LocalAddr().String()
		nc.Close() // the loop has its own descriptor of the socket
		if err != nil {
			s.clients.Add(-1)
			s.log.Warn("cannot take a client socket", zap.Error(err))
			continue
		}
		l := loops[next%len(loops)]
		if !l.post(func() { l.register(fd, remote, local) }) {
			unix.Close(fd)
			s.clients.Add(-1)
		}
	}
}

// socketOf returns a descriptor of nc's socket of the caller's own (non-blocking, as Go's).
func socketOf(nc net.Conn) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("%T has no socket", nc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.Dup(int(s)) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	unix.CloseOnExec(fd)
	return fd, nil
}

func (l *loop) register(fd int, remote, local string) {
	if l.stopping {
		unix.Close(fd)
		l.s.clients.Add(-1)
		return
	}
	sess := l.s.router.NewSession(remote)
	c := l.core.newClient(l.s.ctx, fd, sess, remote)
	sess.SetConn(local, fd, func() {
		l.post(func() {
			if l.clients[fd] == c {
				l.closeClient(c)
			}
		})
	})
	c.ev = unix.EPOLLIN | unix.EPOLLRDHUP
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: c.ev, Fd: int32(fd)}); err != nil {
		unix.Close(fd)
		l.s.clients.Add(-1)
		l.s.log.Warn("epoll add failed", zap.Error(err))
		return
	}
	l.clients[fd] = c
	if l.core.draining {
		l.core.markDirty(c)
	}
}
