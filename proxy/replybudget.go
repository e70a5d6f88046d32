package proxy

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"seckill-proxy/conf"
)

// replyBudget bounds the replies that clients have not read yet, and the commands they sent
// that wait to be served, over every event loop (limits.reply_buffers): a client that
// pipelines reads of large values and never reads the replies would otherwise make the proxy
// hold them all (50 such connections reading a 1 MiB value held 1.7 GB). Past the budget, a client whose socket is full (its last write did not
// take everything) and that holds more than conf.ReplyBufferFloor is disconnected, as Redis's
// client-output-buffer-limit disconnects a client: a client that reads its replies drains
// below the floor, or at least is not full, and keeps its connection.
type replyBudget struct {
	limit  int64 // 0: no bound
	held   atomic.Int64
	closed atomic.Int64
	// log says so at most once a second: a client that reconnects and does it again must not
	// flood the log (closed counts every one).
	log rate.Sometimes
}

// hold counts c's unwritten replies and unserved input as they are now (the storage that
// holds them); true: c is past the budget and must be disconnected (then release it).
func (b *replyBudget) hold(c *client) bool {
	if c.closed {
		return false
	}
	if n := cap(c.out) + c.outSkipped + c.rd.Held(); n == c.counted {
		if n == 0 {
			return false
		}
	} else {
		b.held.Add(int64(n - c.counted))
		c.counted = n
	}
	if b.limit == 0 || !c.blocked || len(c.out) <= conf.ReplyBufferFloor || b.held.Load() <= b.limit {
		return false
	}
	b.closed.Add(1)
	return true
}

// release lets go of what c was counted for: it is closed, or handed over.
func (b *replyBudget) release(c *client) {
	if c.counted != 0 {
		b.held.Add(-int64(c.counted))
		c.counted = 0
	}
}

// replyGrace is how long a client served by a goroutine of its own has to take a write of its
// replies while the proxy holds more than limits.reply_buffers of them.
const replyGrace = time.Second

// errNotReading ends a goroutine-served client that did not take its replies within replyGrace
// while the proxy was past limits.reply_buffers.
var errNotReading = errors.New("the client does not read its replies, and the proxy holds more unread replies than limits.reply_buffers")

// replyWriter writes a goroutine-served client's replies (redcon's Writer flushes through it):
// a write of more than conf.ReplyBufferFloor is counted in the budget while it lasts, and
// while the budget is past its limit it must be taken within replyGrace, or the client is
// disconnected, as the event loops disconnect a client whose socket is full.
// The same holds while other clients' batches wait for room in the goroutine-served clients'
// ask window (askshared.go), which a write not taken holds.
type replyWriter struct {
	nc    net.Conn
	b     *replyBudget
	asks  *sharedAsk // nil: none
	wrote int        // the bytes of the last write
}

func (w *replyWriter) Write(p []byte) (int, error) {
	w.wrote = len(p)
	if w.b.limit == 0 || len(p) <= conf.ReplyBufferFloor {
		return w.nc.Write(p)
	}
	held := w.b.held.Add(int64(len(p)))
	defer w.b.held.Add(-int64(len(p)))
	if held <= w.b.limit && !w.asks.pressed() {
		return w.nc.Write(p)
	}
	_ = w.nc.SetWriteDeadline(time.Now().Add(replyGrace))
	n, err := w.nc.Write(p)
	_ = w.nc.SetWriteDeadline(time.Time{})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.b.closed.Add(1)
		err = errNotReading
		if tc, ok := w.nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // its socket's replies dropped at once on close, not kept for it
		}
	}
	return n, err
}

// The commands of one client in flight are bounded by what their replies may weigh, as a
// TCP window is: a client starts with windowStart, each small reply lets one more go (the
// window doubles per round trip up to limits.max_pipeline), and a large reply shrinks the
// window to windowBytes of replies that size. So a client that pipelines reads of large
// values it never reads has at most a few MiB of replies out at Redis, which would otherwise
// hold them all in its output buffer for the proxy (Redis bounds no normal client's): 1,024
// reads of a 1 MiB value are 1 GiB.
const (
	windowStart = 4
	windowBytes = 4 << 20
	windowLarge = 64 << 10
)

// window is how many commands of one client may be in flight (a loop's client), or go in
// one batch (a goroutine's), sized by the replies seen so far.
type window struct{ n int } // 0: windowStart

// size is how many commands may go now.
func (w *window) size() int {
	if w.n == 0 {
		return windowStart
	}
	return w.n
}

// learn sizes the window by replies that took bytes in all: small ones let as many more go,
// large ones shrink it to windowBytes of replies that size.
func (w *window) learn(bytes, replies int) {
	if replies <= 0 {
		return
	}
	cur := w.size()
	switch per := bytes / replies; {
	case per > windowLarge:
		w.n = max(1, min(cur, windowBytes/per))
	case cur < 1<<16:
		w.n = cur + replies
	}
}
