package proxy

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
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

// memReleaser runs debug.FreeOSMemory at most once per releaseEvery, and once more after the
// last buffer freed within one (4 clients' 64 MiB commands, freed a moment apart, stayed
// held when only the first asked). Safe for concurrent use; the zero value is not usable, see
// newMemReleaser.
type memReleaser struct {
	mu      sync.Mutex
	last    time.Time   // when it last ran
	pending *time.Timer // a run to come
	runs    atomic.Int64
}

func newMemReleaser() *memReleaser { return &memReleaser{} }

// freed tells the releaser that a buffer of at least bigBuffer bytes was let go.
func (m *memReleaser) freed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending != nil {
		return // the run to come frees this one too
	}
	wait := releaseDelay
	if since := time.Since(m.last); since < releaseEvery {
		wait = max(wait, releaseEvery-since)
	}
	m.pending = time.AfterFunc(wait, func() {
		debug.FreeOSMemory()
		m.runs.Add(1)
		m.mu.Lock()
		m.last, m.pending = time.Now(), nil
		m.mu.Unlock()
	})
}
