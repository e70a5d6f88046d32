//go:build linux

package proxy

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawRead and rawWrite are read(2) and write(2) on a non-blocking socket without telling the Go
// scheduler about them (RawSyscall): they never block, and a loop that makes a few per client
// per turn would otherwise have the runtime's monitor hand its core to another thread, and
// back, around many of them (measured: about a quarter of the proxy's CPU under load went to
// that switching).
func rawRead(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

func rawWrite(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}
