//go:build linux

package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// The proxy serves its clients from event loops, as twemproxy does: each loop is one goroutine
// that waits (epoll) on its clients' sockets and on one connection per Redis node of its own,
// reads whatever is ready, sends all its clients' plain pass-through commands to each node in
// one write, and writes each reply to its client as it comes back, in the order of that
// client's commands. A goroutine per client costs two scheduler hand-offs and an extra read per
// request, and gives Redis smaller batches (BENCHMARKS.md). The logic is the core's (core.go);
// this file is its shell: sockets, epoll, and the goroutines that do what a loop must not wait
// for (connecting, the router's slow commands, redirects).
//
// A client that subscribes is handed to a goroutine of its own, with its session and its unread
// input, and stays there: a subscriber's connection is a stream of its own.

const loopMaxEvents = 256

// loop is one event loop: its epoll, its clients and its core.
type loop struct {
	s        *Server
	ep, wake int
	core     *core
	clients  map[int]*client
	upFDs    map[int]*node
	upConns  map[*node]*loopConn // nodes whose connections are net.Conns (TLS): loop_conn_linux.go
	stopping bool

	mu     sync.Mutex // guards posted and shut
	posted []func()
	shut   bool
	done   chan struct{}
}

// serveLoop serves ln from event loops, unless redis.event_loops is 0 (ok false: the caller
// serves ln with a goroutine per client).
func (s *Server) serveLoop(ln net.Listener) (ok bool, err error) {
	if s.upstream == nil || s.noLoop {
		return false, nil
	}
	loops := make([]*loop, max(s.loops, 1))
	for i := range loops {
		if loops[i], err = newLoop(s); err != nil {
			for _, l := range loops[:i] {
				l.closeAll()
			}
			return true, err
		}
	}
	go func() {
		// The command table tells plain commands from the rest; until it loads, everything
		// goes through the router (which loads it too).
		ctx, cancel := context.WithTimeout(s.ctx, s.upstream.Timeout())
		defer cancel()
		_ = s.upstream.LoadCommands(ctx)
	}()
	s.mu.Lock()
	s.loopGroup = loops
	draining := s.draining
	s.mu.Unlock()
	if draining { // Shutdown came first, and did not see the loops
		_ = ln.Close()
		for _, l := range loops {
			l.closeAll()
		}
		return true, nil
	}
	for _, l := range loops { // CLIENT UNPAUSE: each loop serves the clients it held
		s.router.OnUnpause(func() { l.post(func() { l.core.releaseHeld(true) }) })
	}
	s.log.Info("serving RESP", zap.String("addr", ln.Addr().String()), zap.Int("event_loops", len(loops)))
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Go(l.run)
	}
	s.acceptInto(ln, loops)
	wg.Wait()
	return true, nil
}

func newLoop(s *Server) (*loop, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(ep)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		unix.Close(ep)
		unix.Close(wake)
		return nil, fmt.Errorf("epoll: %w", err)
	}
	l := &loop{s: s, ep: ep, wake: wake, clients: map[int]*client{}, upFDs: map[int]*node{}, upConns: map[*node]*loopConn{}, done: make(chan struct{})}
	l.core = newCore(loopEnv{l}, coreLimits{
		maxPipeline: s.limits.MaxPipeline, maxReq: s.limits.MaxArgBytes + 1<<20, maxArgBytes: s.limits.MaxArgBytes,
		maxOut: loopMaxOut, timeout: s.upstream.Timeout(), redialGap: loopRedialGap, ownerLanes: s.upstream.OwnerLanes(),
		askBytes: int64(s.limits.ReplyBuffers) / int64(max(s.loops, 1)),
	}, s.upstream.Standalone() == "")
	if g := s.router.Guard(); g != nil {
		newGuardEngine(l.core, g)
		l.core.metrics = s.metrics
	}
	return l, nil
}

// post runs f on the loop goroutine; false: the loop has ended, and f will not run.
func (l *loop) post(f func()) bool {
	l.mu.Lock()
	if l.shut {
		l.mu.Unlock()
		return false
	}
	l.posted = append(l.posted, f)
	first := len(l.posted) == 1 // otherwise the loop is woken already, and takes f with the rest
	l.mu.Unlock()
	if first {
		var one = [8]byte{1}
		_, _ = unix.Write(l.wake, one[:])
	}
	return true
}

// turning returns nil once the loop has run a function posted to it, or why not by ctx's end:
// a loop that does not turn serves none of its clients, whatever else answers.
func (l *loop) turning(ctx context.Context) error {
	turned := make(chan struct{})
	if !l.post(func() { close(turned) }) {
		return errors.New("an event loop has ended")
	}
	select {
	case <-turned:
		return nil
	case <-ctx.Done():
		return errors.New("an event loop did not turn within the probe's time: its clients are not served")
	}
}

func (l *loop) run() {
	defer close(l.done)
	events := make([]unix.EpollEvent, loopMaxEvents)
	rbuf := make([]byte, loopReadSize)
	for {
		n, err := unix.EpollWait(l.ep, events, l.waitMillis())
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.s.log.Error("epoll wait failed; the event loop stops", zap.Error(err))
			l.stopping = true
		}
		l.core.now = time.Now()
		for _, ev := range events[:max(n, 0)] {
			switch fd := int(ev.Fd); {
			case fd == l.wake:
				l.runPosted()
			default:
				if c := l.clients[fd]; c != nil {
					l.clientEvent(c, ev.Events, rbuf)
				} else if up := l.upFDs[fd]; up != nil {
					l.upEvent(up, ev.Events)
				}
			}
		}
		for _, up := range l.core.expire() {
			l.s.log.Warn("Redis answered nothing in time; reconnecting", zap.String("addr", up.addr), zap.Duration("timeout", l.core.lim.timeout))
			l.closeUp(up)
		}
		l.core.releaseHeld(false)
		l.flush()
		if l.stopping {
			l.closeAll()
			return
		}
	}
}

// waitMillis is how long epoll may wait: not at all while a client has input to serve or
// buys wait to be sent (a call that failed while the turn's writes went out may have been
// sent back for another round), else until the core next has a deadline to keep.
func (l *loop) waitMillis() int {
	if len(l.core.dirty) > 0 || l.core.pendingWork() {
		return 0
	}
	next := l.core.nextDeadline()
	if next.IsZero() {
		return -1
	}
	return max(int((time.Until(next)+time.Millisecond-1)/time.Millisecond), 1)
}

func (l *loop) runPosted() {
	var b [8]byte
	_, _ = unix.Read(l.wake, b[:])
	l.mu.Lock()
	fs := l.posted
	l.posted = nil
	l.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func (l *loop) clientEvent(c *client, ev uint32, rbuf []byte) {
	l.core.markDirty(c)
	if ev&(unix.EPOLLHUP|unix.EPOLLERR) != 0 { // reset, or shut both ways: nobody to answer
		l.closeClient(c)
		return
	}
	if ev&unix.EPOLLOUT != 0 {
		c.blocked = false
	}
	if ev&unix.EPOLLRDHUP != 0 && !l.core.readable(c) {
		// The client shut its sending side while a command of its runs (or its replies
		// wait): it is answered, then closed; one waiting on a blocking command is forgotten
		// at once, as Redis does, and what runs for it (a BLPOP) with it.
		if l.core.peerShut(c) {
			l.closeClient(c)
		}
		return
	}
	if ev&unix.EPOLLIN == 0 || !l.core.readable(c) {
		return
	}
	// A client with nothing pending is read into rbuf, which its reader borrows, keeping a
	// copy of what is left unserved, so that an idle client holds no buffer; one in the middle
	// of a command is read straight into its reader, as much as it has room for.
	buf := rbuf
	if c.rd.Buffered() > 0 {
		buf = c.rd.Buffer(loopReadSize)
	}
	n, err := rawRead(c.id, buf)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return
	}
	if err != nil || (n == 0 && l.core.peerShut(c)) {
		l.closeClient(c)
		return
	}
	if n == 0 {
		return
	}
	if c.rd.Buffered() > 0 {
		held := c.rd.Cap()
		c.rd.Commit(n)
		l.core.process(c)
		if held >= bigBuffer && c.rd.Cap() < held {
			l.s.mem.freed() // a big command, served: its memory may go back (memrelease.go)
		}
	} else {
		l.core.clientRead(c, rbuf[:n])
	}
}

func (l *loop) upEvent(up *node, ev uint32) {
	if ev&unix.EPOLLOUT != 0 {
		l.writeUp(up)
	}
	if ev&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) == 0 || up.fd < 0 {
		return
	}
	room := up.readRoom()
	if cap(up.in)-len(up.in) < room {
		grown := make([]byte, len(up.in), len(up.in)+room)
		copy(grown, up.in)
		up.in = grown
	}
	n, err := rawRead(up.fd, up.in[len(up.in):cap(up.in)])
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return
	}
	if err == nil && n == 0 {
		err = io.EOF
	}
	if err != nil {
		l.core.upFailed(up, fmt.Errorf("redis %s: %w", up.addr, err), unavailLost)
		l.closeUp(up)
		return
	}
	up.in = up.in[:len(up.in)+n]
	l.core.upRead(up)
	if !up.connected {
		l.closeUp(up)
	}
}

// closeUp closes up's socket once the core has let go of the connection.
func (l *loop) closeUp(up *node) {
	if l.closeConn(up) {
		return
	}
	if up.fd >= 0 {
		delete(l.upFDs, up.fd)
		unix.Close(up.fd)
		up.fd = -1
	}
}

func (l *loop) writeUp(up *node) {
	if lc := l.upConns[up]; lc != nil {
		l.sendConn(up, lc)
		return
	}
	if up.fd < 0 {
		return
	}
	if len(up.out) > 0 {
		n, err := rawWrite(up.fd, up.out)
		if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			l.core.upFailed(up, fmt.Errorf("redis %s: %w", up.addr, err), unavailLost)
			l.closeUp(up)
			return
		}
		up.out = consume(up.out, n)
	}
	want := uint32(unix.EPOLLIN)
	if len(up.out) > 0 {
		want |= unix.EPOLLOUT
	}
	if want != up.ev {
		up.ev = want
		if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, up.fd, &unix.EpollEvent{Events: want, Fd: int32(up.fd)}); err != nil {
			l.core.upFailed(up, fmt.Errorf("redis %s: epoll: %w", up.addr, err), unavailLost)
			l.closeUp(up)
		}
	}
}

// flush serves what waiting clients can now go on with, sends the commands gathered to
// Redis, and writes every reply that is ready.
func (l *loop) flush() {
	l.core.flushInputs()
	for _, up := range l.core.ups {
		if len(up.out) > 0 {
			l.writeUp(up)
		}
	}
	l.core.takeDirty(func(c *client) {
		l.writeClient(c)
		if l.s.replies.hold(c) {
			l.s.replies.log.Do(func() {
				l.s.log.Warn("client disconnected: it does not read its replies, and the proxy holds more unread replies than limits.reply_buffers (logged at most once a second)",
					zap.String("client", c.remote), zap.String("user", c.sess.User), zap.Int("unread_bytes", len(c.out)),
					zap.Int64("disconnects_so_far", l.s.replies.closed.Load()))
			})
			// A reset, not a close: the replies in its socket are dropped at once, rather than
			// kept by the kernel for a peer that does not read.
			_ = unix.SetsockoptLinger(c.id, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
			l.closeClient(c)
			return
		}
		switch l.core.settled(c) {
		case "close":
			l.closeClient(c)
		case "handoff":
			l.handOff(c)
		}
		l.arm(c)
	})
}

func (l *loop) writeClient(c *client) {
	if c.closed || c.blocked || len(c.out) == 0 {
		return
	}
	n, err := rawWrite(c.id, c.out)
	if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
		l.closeClient(c)
		return
	}
	c.bigOut = c.bigOut || cap(c.out) >= bigBuffer
	l.core.wrote(c, n, n < len(c.out))
	if c.out == nil && c.bigOut {
		c.bigOut = false
		l.s.mem.freed() // a big reply, written: its memory may go back (memrelease.go)
	}
}

// arm registers the events the client now waits for.
func (l *loop) arm(c *client) {
	if c.closed {
		return
	}
	want := uint32(unix.EPOLLRDHUP)
	if c.shut { // told once; EPOLLRDHUP would wake the loop on every turn
		want = 0
	}
	if l.core.readable(c) {
		want |= unix.EPOLLIN
	}
	if c.blocked {
		want |= unix.EPOLLOUT
	}
	if want != c.ev {
		c.ev = want
		if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, c.id, &unix.EpollEvent{Events: want, Fd: int32(c.id)}); err != nil {
			l.s.log.Warn("epoll: dropping a client", zap.String("remote", c.remote), zap.Error(err))
			l.closeClient(c) // it would never be read or written again
		}
	}
}
