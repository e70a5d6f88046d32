package proxy

import (
	"runtime/debug"
	"time"

	"golang.org/x/time/rate"
)

// A client that sends or is sent one huge value (a PING or GET of 64 MiB) makes the proxy
// hold buffers of that size for a moment. Go frees them at the next collection, but gives the
// memory back to the system only slowly, so one such request left the proxy's RSS at 440 MiB.
// Once a buffer of at least bigBuffer has been let go, the proxy asks the runtime to give
// freed memory back (debug.FreeOSMemory: a collection, then the scavenger), at most once per
// releaseEvery, releaseDelay later on a goroutine of its own: no loop waits for it, and by
// then the loop's own frames no longer hold the buffer (a collection made at once found it
// still reachable, and the proxy kept 90 MiB).
const (
	bigBuffer    = 16 << 20
	releaseEvery = 5 * time.Second
	releaseDelay = 100 * time.Millisecond
)

// memReleaser runs debug.FreeOSMemory at most once per releaseEvery. Safe for concurrent
// use; the zero value is not usable, see newMemReleaser.
type memReleaser struct{ s *rate.Sometimes }

func newMemReleaser() *memReleaser { return &memReleaser{s: &rate.Sometimes{Interval: releaseEvery}} }

// freed tells the releaser that a buffer of at least bigBuffer bytes was let go.
func (m *memReleaser) freed() {
	m.s.Do(func() { time.AfterFunc(releaseDelay, debug.FreeOSMemory) })
}
