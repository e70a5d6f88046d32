//go:build unix

package upstream

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// open reports whether an idle connection is still open: the peer has sent neither its end
// (a FIN: a restart, a server's idle timeout) nor an error, nor anything at all, since an idle
// connection to Redis is owed nothing. One non-blocking peek, no wait.
func open(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		alive = err == unix.EAGAIN || err == unix.EWOULDBLOCK
		return true // done, whatever the answer: never wait for the socket
	})
	return err == nil && alive
}
