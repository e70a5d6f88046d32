//go:build linux

package adminhttp

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// pending says whether bytes wait in c's socket, unread (a peer that has spoken, though its
// server goroutine has not read yet).
func pending(c syscall.Conn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n > 0
}
