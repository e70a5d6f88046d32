package router

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CLIENT PAUSE and CLIENT UNPAUSE of this proxy's clients, as Redis pauses its own: for the
// time given, every client's commands (ALL), or those that may write (WRITE: flagged write or
// may_replicate by Redis, and every command Redis does not know, the proxy's own among them),
// wait before they run, in the order they came; the rest run. A pause never reaches Redis:
// other proxies' clients, and Redis's own, go on. It is what an operator runs on each proxy
// to hold the writes while a master fails over by hand.

// pause is the proxy's pause: until when, and whether it holds every command.
type pause struct {
	// untilNs (Unix ns, 0: none) and all are read on every command, without the lock.
	untilNs atomic.Int64
	all     atomic.Bool
	mu      sync.Mutex
	// over is closed when this pause ends early (UNPAUSE) or is replaced; wake are the
	// servers' event loops, woken then to serve their held clients.
	over chan struct{}
	wake []func()
}

// OnUnpause registers f, run (on the caller's goroutine) each time a pause ends before its
// time (CLIENT UNPAUSE): an event loop posts the serving of its held clients.
func (r *Router) OnUnpause(f func()) {
	r.pause.mu.Lock()
	defer r.pause.mu.Unlock()
	r.pause.wake = append(r.pause.wake, f)
}

// Paused says whether args must wait at now, and until when at most (it may end sooner:
// OnUnpause).
func (r *Router) Paused(args [][]byte, now time.Time) (until time.Time, held bool) {
	u := r.pause.untilNs.Load()
	if u == 0 || now.UnixNano() >= u {
		return time.Time{}, false
	}
	if r.pause.all.Load() || r.opt.Upstream == nil || r.opt.Upstream.MayWrite(args) {
		return time.Unix(0, u), true
	}
	return time.Time{}, false
}

// AwaitPause waits while the pause holds any of cmds (a client's batch, on its own
// goroutine): false if ctx ended first.
func (r *Router) AwaitPause(ctx context.Context, cmds [][][]byte) bool {
	for {
		var until time.Time
		for _, args := range cmds {
			if u, held := r.Paused(args, time.Now()); held {
				until = u
				break
			}
		}
		if until.IsZero() {
			return true
		}
		r.pause.mu.Lock()
		over := r.pause.over
		r.pause.mu.Unlock()
		t := time.NewTimer(time.Until(until))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-over:
		case <-t.C:
		}
		t.Stop()
	}
}

// clientPause serves CLIENT PAUSE <ms> [WRITE|ALL] (an admin's; ALL when no mode is given). A
// pause while one is on keeps the later end and the stronger mode, as Redis does.
func (r *Router) clientPause(s *Session, args [][]byte) (Reply, error) {
	if len(args) != 3 && len(args) != 4 {
		return nil, respError("ERR wrong number of arguments for 'client|pause' command")
	}
	if !s.Admin {
		return nil, respError("NOPERM User " + s.User + " has no permissions to run the 'client|pause' command")
	}
	ms, err := strconv.ParseInt(string(args[2]), 10, 64)
	if err != nil || ms < 0 {
		return nil, respError("ERR timeout is not an integer or out of range")
	}
	all := true
	if len(args) == 4 {
		switch strings.ToLower(string(args[3])) {
		case "write":
			all = false
		case "all":
		default:
			return nil, respError("ERR CLIENT PAUSE mode must be WRITE or ALL")
		}
	}
	now := time.Now()
	until := now.Add(time.Duration(min(ms, int64(24*time.Hour/time.Millisecond))) * time.Millisecond).UnixNano()
	r.pause.mu.Lock()
	if cur := r.pause.untilNs.Load(); now.UnixNano() < cur { // a pause on: the later end, and the stronger mode
		all = all || r.pause.all.Load()
		until = max(until, cur)
	}
	r.pause.all.Store(all)
	r.pause.untilNs.Store(until)
	r.setPause(false)
	return OK, nil
}

// clientUnpause serves CLIENT UNPAUSE (an admin's): the held commands run now.
func (r *Router) clientUnpause(s *Session, args [][]byte) (Reply, error) {
	if len(args) != 2 {
		return nil, respError("ERR wrong number of arguments for 'client|unpause' command")
	}
	if !s.Admin {
		return nil, respError("NOPERM User " + s.User + " has no permissions to run the 'client|unpause' command")
	}
	r.pause.mu.Lock()
	r.pause.untilNs.Store(0)
	r.setPause(true)
	return OK, nil
}

// setPause ends with r.pause.mu, which the caller holds, unlocked: when ended (the pause
// ended or holds fewer commands), those waiting are woken.
func (r *Router) setPause(ended bool) {
	over := r.pause.over
	if over == nil || ended {
		r.pause.over = make(chan struct{})
	}
	wake := r.pause.wake
	r.pause.mu.Unlock()
	if over != nil && ended {
		close(over)
	}
	if ended {
		for _, f := range wake {
			f()
		}
	}
}
