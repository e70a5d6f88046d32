package niceness

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// check refuses a nice value outside 0-19: a negative one would ask for more priority, which
// takes a privilege this package does not seek.
func check(n int) error {
	if n < 0 || n > 19 {
		return fmt.Errorf("nice value %d is not in 0-19", n)
	}
	return nil
}

// lowerOne sets who's nice value to n unless it is n or above already.
func lowerOne(which, who, n int) error {
	p, err := unix.Getpriority(which, who)
	if err != nil {
		return err
	}
	if now := niceOf(p); now >= n {
		return nil
	}
	return unix.Setpriority(which, who, n)
}

// Of is the nice value of thread (on Linux) or process who, 0 for the caller.
func Of(who int) (int, error) {
	p, err := unix.Getpriority(unix.PRIO_PROCESS, who)
	if err != nil {
		return 0, err
	}
	return niceOf(p), nil
}
