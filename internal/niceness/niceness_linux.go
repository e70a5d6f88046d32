package niceness

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Lower sets the nice value of every thread of this process to n (0-19) where it is below n,
// and says how many threads it set.
func Lower(n int) (int, error) {
	if err := check(n); err != nil {
		return 0, err
	}
	done := map[int]bool{}
	for range 8 {
		tids, err := threads()
		if err != nil {
			return len(done), err
		}
		fresh := 0
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh++
			done[tid] = true
			if err := lowerOne(unix.PRIO_PROCESS, tid, n); err != nil {
				return len(done), fmt.Errorf("thread %d: %w", tid, err)
			}
		}
		if fresh == 0 {
			return len(done), nil
		}
	}
	return len(done), nil
}

// threads lists this process's thread ids.
func threads() ([]int, error) {
	es, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(es))
	for _, e := range es {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
