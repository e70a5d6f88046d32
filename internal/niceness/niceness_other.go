//go:build !linux

package niceness

import "golang.org/x/sys/unix"

// Lower sets the process's nice value to n (0-19) if it is below n. It says 1: the process is
// one unit of priority here.
func Lower(n int) (int, error) {
	if err := check(n); err != nil {
		return 0, err
	}
	return 1, lowerOne(unix.PRIO_PROCESS, 0, n)
}
