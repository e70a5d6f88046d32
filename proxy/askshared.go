package proxy

import (
	"context"
	"sync"
	"sync/atomic"
)

// sharedAsk is the askWindow of the clients served by goroutines of their own (no event
// loop, or TLS clients): the bytes of replies their batches asked of Redis and have not yet
// handed to the client's socket, estimated per command as the loops' are (core_askwin.go). A
// batch takes its charge before it goes and gives it back once its replies are written, so
// the replies the proxy holds for clients that do not read, and those it has asked Redis
// for, are within the window (before, 50 such clients took the proxy to 913 MiB). A batch
// waits while the window has no room for it, unless nothing at all is out.
type sharedAsk struct {
	mu    sync.Mutex
	w     askWindow
	freed chan struct{} // closed, and made anew, whenever room is given back
	// stopped is closed when the server drains: a batch that waits for room goes no more.
	stopped  chan struct{}
	stopOnce sync.Once
	// waiting counts the batches that wait for room.
	waiting atomic.Int64
}

// pressed: batches wait for room (nil: never).
func (a *sharedAsk) pressed() bool { return a != nil && a.waiting.Load() > 0 }

func newSharedAsk(limit int64) *sharedAsk {
	return &sharedAsk{w: askWindow{limit: limit}, freed: make(chan struct{}), stopped: make(chan struct{})}
}

// stop ends every wait for room, now and later: the server drains, and serves no new batch.
func (a *sharedAsk) stop() { a.stopOnce.Do(func() { close(a.stopped) }) }

// askCharge is what one command of a batch was charged.
type askCharge struct {
	hash    uint64
	charge  int64
	unknown bool
}

// take charges the batch of hashes hs, waiting for room; false when ctx ends first, or the
// server drains while it waits.
func (a *sharedAsk) take(ctx context.Context, hs []uint64, into []askCharge) ([]askCharge, bool) {
	a.mu.Lock()
	for waited := false; !a.roomFor(hs); {
		if !waited {
			waited = true
			a.waiting.Add(1)
			defer a.waiting.Add(-1)
		}
		wait := a.freed
		a.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return into, false
		case <-a.stopped:
			return into, false
		}
		a.mu.Lock()
	}
	for _, h := range hs {
		charge, unknown, _ := a.w.ask(h)
		into = append(into, askCharge{hash: h, charge: charge, unknown: unknown})
	}
	a.mu.Unlock()
	return into, true
}

// roomFor: the batch fits now (nothing out at all: it goes whatever it weighs). Under mu.
func (a *sharedAsk) roomFor(hs []uint64) bool {
	if a.w.out == 0 {
		for _, h := range hs {
			if a.w.unknown[h] > 0 {
				return false
			}
		}
		return true
	}
	saved := a.w.out
	ok := true
	for _, h := range hs {
		if !a.w.may(h) {
			ok = false
			break
		}
		e := &a.w.sizes[h&(askSizes-1)]
		if e.hash == h && e.size > 0 {
			a.w.out += e.size
		} else {
			a.w.out += askUnknown
		}
	}
	a.w.out = saved
	return ok
}

// give gives back a batch's charges once its replies, wrote bytes in all, are written: each
// command learns an equal share of them.
func (a *sharedAsk) give(cs []askCharge, wrote int) {
	if len(cs) == 0 {
		return
	}
	per := wrote / len(cs)
	a.mu.Lock()
	for _, c := range cs {
		a.w.release(c.hash, c.charge, c.unknown, per)
	}
	close(a.freed)
	a.freed = make(chan struct{})
	a.mu.Unlock()
}
