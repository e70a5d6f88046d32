package conf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxConfigFile bounds the configuration file read, at start and at each reload.
const MaxConfigFile = 1 << 20

// ReadTimeout bounds the reading of the configuration file: a file on a mount that hangs
// fails the reload, which changes nothing, rather than holding the next.
const ReadTimeout = 5 * time.Second

// reading is set while a read of the configuration file is under way; a read that outlived
// ReadTimeout keeps it set until it returns, and reads meanwhile fail at once, so that hung
// reads do not pile up.
var reading atomic.Bool

// readConfigFile reads path, which must be a regular file (a symlink to one, as Kubernetes
// mounts a ConfigMap, is followed) of at most MaxConfigFile bytes, within ReadTimeout. A FIFO,
// a device or a directory is refused without being read: opening a FIFO for reading waits for
// a writer.
func readConfigFile(path string) ([]byte, error) {
	if !reading.CompareAndSwap(false, true) {
		return nil, errors.New("an earlier read of it has not returned yet (a hung mount?)")
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := readRegular(path)
		// Cleared before the result is handed over: a read that follows at once must not
		// find this one still marked (it was, under -race on a busy machine, in CI).
		reading.Store(false)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-time.After(ReadTimeout):
		return nil, fmt.Errorf("not read within %v", ReadTimeout)
	}
}

// readRegular reads path if it is a regular file of at most MaxConfigFile bytes.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("not a regular file (%v)", st.Mode().Type())
	case st.Size() > MaxConfigFile:
		return nil, fmt.Errorf("%d bytes, over %d", st.Size(), MaxConfigFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigFile+1))
	if err == nil && len(b) > MaxConfigFile {
		err = fmt.Errorf("over %d bytes", MaxConfigFile)
	}
	return b, err
}
