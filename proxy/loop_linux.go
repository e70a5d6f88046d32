//go:build linux

package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"seckill-proxy/internal/resp"
	"seckill-proxy/router"
	"seckill-proxy/upstream"
)

// The proxy serves its clients from one event loop, as twemproxy does: one goroutine waits
// (epoll) on every client socket and on one connection per Redis node, reads whatever is
// ready, sends all the clients' plain pass-through commands to each node in one write, and
// writes each reply to its client as it comes back, in the order of that client's commands.
// A goroutine per client (redcon's way) costs two scheduler hand-offs and an extra read per
// request, and gives Redis smaller batches; at one command per client round trip that is the
// difference between about 0.65 and about 1.0 of twemproxy's throughput (BENCHMARKS.md).
//
// Everything else a client sends (AUTH, the proxy's own commands, transactions, blocking
// commands, SCAN, commands over several slots) goes through the router exactly as on the
// redcon path, on a goroutine of its own, while that client's later commands wait. A client
// that subscribes or buys is handed to the redcon server, with its session and its unread
// input, and stays there: a subscriber needs a connection of its own, and a buyer's buys go
// fastest straight from its goroutine to the guard (through the loop, -P 1 buys measured
// 0.84-0.93 of that).

const (
	loopReadSize  = 64 << 10
	loopMaxOut    = 1 << 20 // a client with this much of its replies unsent is not read from
	loopMaxEvents = 256
	// loopRedialGap: after a failed dial, commands are answered -UNAVAILABLE at once for this
	// long before the next dial is tried.
	loopRedialGap = 100 * time.Millisecond
)

// loopClient is one client connection, owned by the loop goroutine.
type loopClient struct {
	fd   int
	sess *router.Session
	rd   *resp.Reader // what the client sent, not yet served
	out  []byte       // replies not yet written

	seqNext uint64            // the sequence number of the next command sent to Redis
	seqOut  uint64            // the sequence number of the next reply to write
	held    map[uint64][]byte // replies that came back before those of earlier commands
	busy    bool              // a goroutine serves a batch of its commands through the router
	closing bool              // close once every reply owed is written (QUIT, a protocol error)
	handoff bool              // hand to a goroutine of its own once every reply owed is written
	closed  bool              // no longer the loop's: replies still owed are dropped
	blocked bool              // the last write did not take everything: wait until writable
	stalled bool              // rd holds commands that waited for the client to be servable
	dirty   bool              // in loop.dirty
	events  uint32            // registered with epoll
	remote  string            // for logs
}

// owed is how many commands sent to Redis still wait for their reply to be written.
func (c *loopClient) owed() int { return int(c.seqNext - c.seqOut) }

// inflight is a command sent to Redis, in the order the replies will come back.
type inflight struct {
	c   *loopClient
	seq uint64
	at  time.Time
	// raw is the command, kept in front of a cluster for a MOVED or ASK reply.
	raw []byte
}

// upconn is the loop's connection to one Redis node.
type upconn struct {
	addr    string
	fd      int // -1: none
	out     []byte
	in      []byte
	ev      uint32
	dialing bool
	retryAt time.Time // no dial before then; commands get lastErr
	lastErr error
	queue   []inflight
	head    int
	scan    resp.ReplyScanner // where the reply at the front of in ends, kept across reads
}

// loop is the event loop serving one listener. One: two loops sharing the clients were 10%
// slower on this project's two-core benchmark machine, where Redis and the clients need the
// other core.
type loop struct {
	s        *Server
	ln       net.Listener
	ep, wake int
	maxReq   int // bytes of input without a complete command
	timeout  time.Duration
	clients  map[int]*loopClient
	dirty    []*loopClient
	now      time.Time
	draining bool
	stopping bool

	// The connections to Redis, by address and by descriptor.
	ups     map[string]*upconn
	upFDs   map[int]*upconn
	cluster bool // keep commands for MOVED and ASK
	// inflight counts the commands sent to Redis and not answered yet, redirects included;
	// while there are any, the loop holds a Server.begin.
	inflight int
	// redirects wait for the goroutine that follows them (redirecting: it is running).
	redirects   []redirectJob
	redirecting bool

	mu     sync.Mutex // guards posted and shut
	posted []func()
	shut   bool
	done   chan struct{}
}

// serveLoop serves ln from the event loop, unless redis.event_loop is off (ok false: the
// caller serves ln with redcon).
func (s *Server) serveLoop(ln net.Listener) (ok bool, err error) {
	if s.upstream == nil || s.noLoop {
		return false, nil
	}
	l, err := newLoop(s, ln)
	if err != nil {
		return true, err
	}
	go func() {
		// The command table tells plain commands from the rest; until it loads, everything
		// goes through the router (which loads it too).
		ctx, cancel := context.WithTimeout(s.ctx, s.upstream.Timeout())
		defer cancel()
		_ = s.upstream.LoadCommands(ctx)
	}()
	s.mu.Lock()
	s.loop = l
	draining := s.draining
	s.mu.Unlock()
	if draining { // Shutdown came first, and did not see the loop
		_ = ln.Close()
		l.closeAll()
		return true, nil
	}
	go l.accept()
	l.run()
	return true, nil
}

func newLoop(s *Server, ln net.Listener) (*loop, error) {
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
	return &loop{s: s, ln: ln, ep: ep, wake: wake, maxReq: s.limits.MaxArgBytes + 1<<20,
		timeout: s.upstream.Timeout(), clients: map[int]*loopClient{}, ups: map[string]*upconn{},
		upFDs: map[int]*upconn{}, cluster: s.upstream.Standalone() == "", done: make(chan struct{})}, nil
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

// accept takes connections from the listener and gives their sockets to the loop, until the
// listener is closed.
func (l *loop) accept() {
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.s.log.Warn("accept failed", zap.Error(err))
			time.Sleep(5 * time.Millisecond) // out of file descriptors, say: do not spin
			continue
		}
		if err := l.s.admit(); err != nil {
			_, _ = nc.Write(redcon.AppendError(nil, err.Error()))
			nc.Close()
			continue
		}
		fd, err := socketOf(nc)
		remote := nc.RemoteAddr().String()
		nc.Close() // the loop has its own descriptor of the socket
		if err != nil {
			l.s.clients.Add(-1)
			l.s.log.Warn("cannot take a client socket", zap.Error(err))
			continue
		}
		if !l.post(func() { l.register(fd, remote) }) {
			unix.Close(fd)
			l.s.clients.Add(-1)
		}
	}
}

// socketOf returns a descriptor of nc's socket of the caller's own (non-blocking, as Go's).
func socketOf(nc net.Conn) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("%T has no socket", nc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.Dup(int(s)) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	unix.CloseOnExec(fd)
	return fd, nil
}

func (l *loop) register(fd int, remote string) {
	if l.stopping {
		unix.Close(fd)
		l.s.clients.Add(-1)
		return
	}
	sess := l.s.router.NewSession()
	sess.Remote = remote
	c := &loopClient{fd: fd, sess: sess, rd: resp.NewReader(int64(l.s.limits.MaxArgBytes)), remote: remote, events: unix.EPOLLIN}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		unix.Close(fd)
		l.s.clients.Add(-1)
		l.s.log.Warn("epoll add failed", zap.Error(err))
		return
	}
	l.clients[fd] = c
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
		l.now = time.Now()
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
		l.expire()
		l.flush()
		if l.stopping {
			l.closeAll()
			return
		}
	}
}

// waitMillis is how long epoll may wait: not at all while a client has input to serve, else
// until the oldest command in flight times out.
func (l *loop) waitMillis() int {
	if len(l.dirty) > 0 {
		return 0
	}
	var oldest time.Time
	for _, up := range l.ups {
		if up.head < len(up.queue) && (oldest.IsZero() || up.queue[up.head].at.Before(oldest)) {
			oldest = up.queue[up.head].at
		}
	}
	if oldest.IsZero() {
		return -1
	}
	left := time.Until(oldest.Add(l.timeout))
	return max(int((left+time.Millisecond-1)/time.Millisecond), 1)
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

func (l *loop) markDirty(c *loopClient) {
	if !c.dirty {
		c.dirty = true
		l.dirty = append(l.dirty, c)
	}
}

func (l *loop) clientEvent(c *loopClient, ev uint32, rbuf []byte) {
	l.markDirty(c)
	if ev&(unix.EPOLLHUP|unix.EPOLLERR) != 0 { // reset, or shut both ways: nobody to answer
		l.closeClient(c)
		return
	}
	if ev&unix.EPOLLOUT != 0 {
		c.blocked = false
	}
	if ev&unix.EPOLLIN == 0 || !l.readable(c) {
		return
	}
	// A client with nothing pending is read into rbuf, which its reader borrows and keeps a
	// copy of what is left unserved, so that an idle client holds no buffer; one in the
	// middle of a command is read straight into its reader, as much as it has room for.
	lent := c.rd.Buffered() == 0
	buf := rbuf
	if !lent {
		buf = c.rd.Buffer(loopReadSize)
	}
	n, err := unix.Read(c.fd, buf)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return
	}
	if err != nil || n == 0 {
		l.closeClient(c)
		return
	}
	if lent {
		c.rd.Lend(rbuf[:n])
	} else {
		c.rd.Commit(n)
	}
	l.process(c)
	c.rd.Return()
}

// canServe: the client's next command may be served now.
func (l *loop) canServe(c *loopClient) bool {
	return !c.closed && !c.busy && !c.closing && !c.handoff && len(c.out) < loopMaxOut &&
		c.owed() < l.s.limits.MaxPipeline
}

// readable: the client may be read from (a bound on its unserved input besides canServe).
func (l *loop) readable(c *loopClient) bool {
	return l.canServe(c) && c.rd.Buffered() <= l.maxReq
}

// process serves the commands the client has sent while it can; the rest wait in its reader.
func (l *loop) process(c *loopClient) {
	c.stalled = false
	defer func() { c.stalled = c.rd.Buffered() > 0 && !l.canServe(c) }()
	defer c.rd.Release()
	for l.canServe(c) {
		cmd, ok, err := c.rd.Next(!c.sess.Authed)
		if err != nil {
			if c.owed() == 0 { // after the replies owed; until then the error comes again
				// AppendError keeps on one line a message that quotes the client's bytes.
				l.reply(c, redcon.AppendError(nil, "ERR "+err.Error()))
				c.closing = true
			}
			return
		}
		if !ok {
			if c.rd.Buffered() > l.maxReq && c.owed() == 0 {
				l.reply(c, tooLargeReply(int64(l.maxReq)))
				c.closing = true
			}
			return
		}
		if l.draining {
			c.rd.Unread()
			if c.owed() == 0 {
				l.reply(c, redcon.AppendError(nil, errShuttingDown.Error()))
				c.closing = true
			}
			return
		}
		if addr := l.s.router.Direct(c.sess, cmd.Args); addr != "" {
			l.forward(c, addr, cmd)
			continue
		}
		if c.owed() > 0 { // the proxy's commands wait for the replies before them
			c.rd.Unread()
			return
		}
		if l.s.router.OwnGoroutine(cmd.Args) {
			c.rd.Unread()
			c.handoff = true
			return
		}
		// The commands that follow go with it, unless the client has yet to log in: an AUTH
		// changes what may follow.
		cmds := [][][]byte{router.CopyArgs(cmd.Args)}
		for c.sess.Authed && len(cmds) < l.s.limits.MaxPipeline {
			cmd, ok, err := c.rd.Next(false)
			if err != nil || !ok {
				break
			}
			if l.s.router.OwnGoroutine(cmd.Args) {
				c.rd.Unread()
				break
			}
			cmds = append(cmds, router.CopyArgs(cmd.Args))
		}
		l.serveSlow(c, cmds)
		return
	}
}

func (l *loop) reply(c *loopClient, b []byte) {
	if c.closed {
		return
	}
	c.out = append(c.out, b...)
	l.markDirty(c)
}

// forward queues one command for the Redis node at addr.
func (l *loop) forward(c *loopClient, addr string, cmd resp.Command) {
	up := l.ups[addr]
	if up == nil {
		up = &upconn{addr: addr, fd: -1}
		l.ups[addr] = up
	}
	seq := c.seqNext
	c.seqNext++
	l.s.router.Counted(1)
	if up.fd < 0 && !up.dialing && l.now.Before(up.retryAt) {
		l.complete(c, seq, upstream.Unavailable(up.lastErr), true)
		return
	}
	if !l.track(1) {
		l.complete(c, seq, redcon.AppendError(nil, errShuttingDown.Error()), true)
		c.closing = true
		return
	}
	if up.fd < 0 && !up.dialing {
		l.dial(up)
	}
	start := len(up.out)
	switch {
	case !cmd.Inline && len(up.out) == 0 && len(cmd.Raw) > 4*loopReadSize:
		// A big command, read in many pieces: Redis gets the reader's buffer, without a copy.
		if raw := c.rd.Take(); raw != nil {
			up.out = raw
		} else {
			up.out = append(up.out, cmd.Raw...)
		}
	case !cmd.Inline:
		up.out = append(up.out, cmd.Raw...)
	default: // an inline command: Redis gets it as RESP
		up.out = redcon.AppendArray(up.out, len(cmd.Args))
		for _, a := range cmd.Args {
			up.out = redcon.AppendBulk(up.out, a)
		}
	}
	in := inflight{c: c, seq: seq, at: l.now}
	if l.cluster {
		in.raw = bytes.Clone(up.out[start:])
	}
	up.queue = append(up.queue, in)
}

// track counts n commands more (or fewer) in flight. The first one takes a Server.begin, so
// that a shutdown waits for the replies, and fails once the server drains; the last one
// gives it back.
func (l *loop) track(n int) bool {
	if l.inflight == 0 && n > 0 && !l.s.begin() {
		return false
	}
	l.inflight += n
	if l.inflight == 0 {
		l.s.end()
	}
	return true
}

// complete gives a client the reply to its command number seq, in the order of its commands.
// owned: reply's storage is the client's to keep, not to copy.
func (l *loop) complete(c *loopClient, seq uint64, reply []byte, owned bool) {
	if c.closed {
		return
	}
	if seq != c.seqOut {
		if c.held == nil {
			c.held = map[uint64][]byte{}
		}
		if !owned {
			reply = bytes.Clone(reply)
		}
		c.held[seq] = reply
		return
	}
	if owned && len(c.out) == 0 {
		c.out = reply
	} else {
		c.out = append(c.out, reply...)
	}
	c.seqOut++
	for len(c.held) > 0 {
		r, ok := c.held[c.seqOut]
		if !ok {
			break
		}
		delete(c.held, c.seqOut)
		c.out = append(c.out, r...)
		c.seqOut++
	}
	l.markDirty(c)
}

// serveSlow runs cmds through the router on a goroutine of their own; the client's later
// commands wait until it is done.
func (l *loop) serveSlow(c *loopClient, cmds [][][]byte) {
	c.busy = true
	sess := c.sess
	go func() {
		w := redcon.NewWriter(nil) // its buffer is taken, never flushed
		quit := false
		if !l.s.begin() {
			w.WriteError(errShuttingDown.Error())
			quit = true
		} else {
			func() {
				defer l.s.end()
				defer func() {
					if p := recover(); p != nil {
						l.s.log.Error("command panicked; closing its connection", zap.Any("panic", p))
						quit = true
					}
				}()
				l.s.router.Serve(l.s.ctx, sess, cmds, w)
			}()
		}
		quit = quit || sess.Quit
		l.post(func() { l.slowDone(c, w.Buffer(), quit) })
	}()
}

func (l *loop) slowDone(c *loopClient, out []byte, quit bool) {
	c.busy = false
	if c.closed {
		l.s.router.CloseSession(c.sess)
		return
	}
	l.reply(c, out)
	c.closing = c.closing || quit
}

// dial opens the connection to up's node on a goroutine; commands queue meanwhile.
func (l *loop) dial(up *upconn) {
	up.dialing = true
	go func() {
		ctx, cancel := context.WithTimeout(l.s.ctx, l.timeout)
		defer cancel()
		nc, err := l.s.upstream.Dial(ctx, up.addr)
		fd := -1
		if err == nil {
			fd, err = socketOf(nc)
			nc.Close()
		}
		if !l.post(func() { l.dialed(up, fd, err) }) && err == nil {
			unix.Close(fd)
		}
	}()
}

func (l *loop) dialed(up *upconn, fd int, err error) {
	up.dialing = false
	if err == nil && l.stopping {
		unix.Close(fd)
		return
	}
	if err == nil {
		err = unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		up.lastErr, up.retryAt = err, l.now.Add(loopRedialGap)
		l.s.log.Warn("cannot connect to Redis", zap.String("addr", up.addr), zap.Error(err))
		l.upFail(up, err)
		return
	}
	up.fd, up.ev = fd, unix.EPOLLIN
	l.upFDs[fd] = up
}

func (l *loop) upEvent(up *upconn, ev uint32) {
	if ev&unix.EPOLLOUT != 0 {
		l.writeUp(up)
	}
	if ev&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) == 0 || up.fd < 0 {
		return
	}
	// Read into the buffer's spare room, at least as much as it holds, and at once all of a
	// bulk string whose length came: a big reply arrives in few reads, and is copied once.
	room := max(loopReadSize, len(up.in))
	if need := up.scan.Need(); need > len(up.in) {
		room = max(loopReadSize, need-len(up.in))
	}
	if cap(up.in)-len(up.in) < room {
		grown := make([]byte, len(up.in), len(up.in)+room)
		copy(grown, up.in)
		up.in = grown
	}
	n, err := unix.Read(up.fd, up.in[len(up.in):cap(up.in)])
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return
	}
	if err == nil && n == 0 {
		err = io.EOF
	}
	if err != nil {
		l.upFail(up, fmt.Errorf("redis %s: %w", up.addr, err))
		return
	}
	up.in = up.in[:len(up.in)+n]
	off := 0
	for up.head < len(up.queue) {
		k, err := up.scan.Scan(up.in[off:])
		if err != nil {
			l.upFail(up, fmt.Errorf("redis %s: %w", up.addr, upstream.ErrProtocol))
			return
		}
		if k == 0 {
			break
		}
		if off == 0 && k == len(up.in) && k > 4*loopReadSize {
			// A big reply alone in the buffer: the client's, without a copy.
			l.deliver(up, up.in[:k:k], true)
			up.in, off = nil, 0
			break
		}
		l.deliver(up, up.in[off:off+k], false)
		off += k
	}
	if off < len(up.in) && up.head == len(up.queue) {
		l.upFail(up, fmt.Errorf("redis %s: %w", up.addr, upstream.ErrProtocol))
		return
	}
	if off > 0 { // a reply in part stays at the front; one not begun costs nothing
		up.in = up.in[:copy(up.in, up.in[off:])]
	}
	if len(up.in) == 0 && cap(up.in) > 4*loopReadSize {
		up.in = nil
	}
	up.settle()
}

// deliver gives the oldest command in flight on up its reply; a MOVED or ASK reply is
// followed first. owned: reply's storage is the client's to keep.
func (l *loop) deliver(up *upconn, reply []byte, owned bool) {
	in := up.queue[up.head]
	up.queue[up.head] = inflight{}
	up.head++
	if in.raw != nil && upstream.IsRedirect(reply) {
		l.redirect(in, reply)
		return
	}
	l.complete(in.c, in.seq, reply, owned)
	l.track(-1)
}

// redirect follows a MOVED or ASK reply as the router would, on a goroutine, the command still
// in flight until then. Redirects run one at a time, in the order their replies came: a
// pipeline's commands for a slot that moved (a SET, then a GET of the same key) all come back
// redirected, and must run on the new node in the order they were sent.
func (l *loop) redirect(in inflight, reply []byte) {
	l.redirects = append(l.redirects, redirectJob{in: in, reply: bytes.Clone(reply)})
	if !l.redirecting {
		l.nextRedirects()
	}
}

type redirectJob struct {
	in    inflight
	reply []byte
}

// nextRedirects hands the redirects waiting to a goroutine, which follows them in turn.
func (l *loop) nextRedirects() {
	jobs := l.redirects
	l.redirects, l.redirecting = nil, len(jobs) > 0
	if len(jobs) == 0 {
		return
	}
	go func() {
		for _, j := range jobs {
			var out []byte
			rd := resp.NewReader(int64(len(j.in.raw)))
			rd.Lend(j.in.raw)
			if cmd, ok, err := rd.Next(false); !ok || err != nil {
				out = upstream.Unavailable(fmt.Errorf("cannot read the command back: %v", err))
			} else {
				ctx, cancel := context.WithTimeout(l.s.ctx, l.timeout)
				out = l.s.upstream.Redirect(ctx, j.reply, cmd.Args)
				cancel()
			}
			l.post(func() {
				l.complete(j.in.c, j.in.seq, out, false)
				l.track(-1)
			})
		}
		l.post(l.nextRedirects)
	}()
}

// settle reclaims the answered part of the queue.
func (up *upconn) settle() {
	switch {
	case up.head == len(up.queue):
		up.queue, up.head = up.queue[:0], 0
	case up.head > 1024 && up.head > len(up.queue)/2:
		up.queue = up.queue[:copy(up.queue, up.queue[up.head:])]
		up.head = 0
	}
}

// upFail drops the connection to up's node and answers every command in flight there with err.
func (l *loop) upFail(up *upconn, err error) {
	if up.fd >= 0 {
		delete(l.upFDs, up.fd)
		unix.Close(up.fd)
		up.fd = -1
	}
	up.in, up.out, up.scan = up.in[:0], up.out[:0], resp.ReplyScanner{}
	reply := upstream.Unavailable(err)
	for up.head < len(up.queue) {
		l.deliver(up, reply, false)
	}
	up.settle()
}

// expire fails everything in flight on a node whose oldest command has waited past the
// timeout.
func (l *loop) expire() {
	for _, up := range l.ups {
		if up.head < len(up.queue) && l.now.Sub(up.queue[up.head].at) >= l.timeout {
			l.s.log.Warn("Redis did not answer in time; reconnecting", zap.String("addr", up.addr), zap.Duration("timeout", l.timeout))
			l.upFail(up, fmt.Errorf("redis %s: %w", up.addr, os.ErrDeadlineExceeded))
		}
	}
}

func (l *loop) writeUp(up *upconn) {
	if up.fd < 0 || len(up.out) == 0 {
		l.armUp(up)
		return
	}
	var err error
	if up.out, err = writeSome(up.fd, up.out); err != nil {
		l.upFail(up, fmt.Errorf("redis %s: %w", up.addr, err))
		return
	}
	l.armUp(up)
}

func (l *loop) armUp(up *upconn) {
	if up.fd < 0 {
		return
	}
	want := uint32(unix.EPOLLIN)
	if len(up.out) > 0 {
		want |= unix.EPOLLOUT
	}
	if want != up.ev {
		up.ev = want
		if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, up.fd, &unix.EpollEvent{Events: want, Fd: int32(up.fd)}); err != nil {
			l.upFail(up, fmt.Errorf("redis %s: epoll: %w", up.addr, err))
		}
	}
}

// flush serves what waiting clients can now go on with, sends the commands gathered to
// Redis, and writes every reply that is ready.
func (l *loop) flush() {
	for i := 0; i < len(l.dirty); i++ { // process may mark more clients dirty
		switch c := l.dirty[i]; {
		case c.rd.Buffered() == 0:
		case l.canServe(c):
			l.process(c)
		default:
			c.stalled = true // its input waits until it can be served: see below
		}
	}
	for _, up := range l.ups {
		if len(up.out) > 0 {
			l.writeUp(up)
		}
	}
	pending := l.dirty[:0]
	for _, c := range l.dirty {
		c.dirty = false
		l.writeClient(c)
		l.settle(c)
		l.arm(c)
		// Input already read waits for no event: serve it on the next turn, which then does not
		// wait in epoll.
		if c.stalled && l.canServe(c) {
			c.dirty = true
			pending = append(pending, c)
		}
	}
	l.dirty = pending
}

func (l *loop) writeClient(c *loopClient) {
	if c.closed || c.blocked || len(c.out) == 0 {
		return
	}
	var err error
	if c.out, err = writeSome(c.fd, c.out); err != nil {
		l.closeClient(c)
		return
	}
	c.blocked = len(c.out) > 0
}

// writeSome writes what the socket takes of buf now and returns the rest, without moving it:
// a reply of 100 MiB to a client that takes 64 KiB at a time must not be copied once per
// write. What is appended after reuses the room at the end, or moves the rest once; the
// storage is let go once empty and large.
func writeSome(fd int, buf []byte) ([]byte, error) {
	n, err := unix.Write(fd, buf)
	if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
		return buf, err
	}
	switch {
	case n < len(buf):
		return buf[max(n, 0):], nil
	case cap(buf) > 4*loopReadSize:
		return nil, nil
	}
	return buf[:0], nil // all written: the same storage again, from its start
}

// settle closes or hands over a client that asked for it once nothing is owed to it.
func (l *loop) settle(c *loopClient) {
	if c.closed || c.owed() > 0 || c.busy || len(c.out) > 0 {
		return
	}
	switch {
	case c.closing:
		l.closeClient(c)
	case c.handoff:
		l.handOff(c)
	}
}

// arm registers the events the client now waits for.
func (l *loop) arm(c *loopClient) {
	if c.closed {
		return
	}
	var want uint32
	if l.readable(c) {
		want |= unix.EPOLLIN
	}
	if c.blocked {
		want |= unix.EPOLLOUT
	}
	if want != c.events {
		c.events = want
		if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: want, Fd: int32(c.fd)}); err != nil {
			l.s.log.Warn("epoll: dropping a client", zap.String("remote", c.remote), zap.Error(err))
			l.closeClient(c) // it would never be read or written again
		}
	}
}

func (l *loop) closeClient(c *loopClient) {
	if c.closed {
		return
	}
	c.closed = true
	delete(l.clients, c.fd)
	unix.Close(c.fd)
	l.s.clients.Add(-1)
	if !c.busy {
		l.s.router.CloseSession(c.sess)
	}
}

// handOff gives a client that subscribes or buys, with its session and what it sent that is
// not served yet, to a goroutine of its own, which serves it from then on.
func (l *loop) handOff(c *loopClient) {
	c.closed = true
	delete(l.clients, c.fd)
	// Out of epoll first: the registration follows the socket, which outlives this descriptor.
	// Should that fail, the loop ignores events on a descriptor it no longer knows.
	_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, c.fd, nil)
	f := os.NewFile(uintptr(c.fd), c.remote)
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		l.s.clients.Add(-1)
		l.s.router.CloseSession(c.sess)
		l.s.log.Warn("cannot hand a client over", zap.Error(err))
		return
	}
	l.s.conns.Add(1)
	go l.s.serveConn(nc, c.sess, bytes.Clone(c.rd.Pending()))
}

// drain stops taking connections and commands; what is in flight is still answered.
func (l *loop) drain() {
	_ = l.ln.Close()
	l.post(func() {
		l.draining = true
		for _, c := range l.clients {
			l.markDirty(c)
		}
	})
}

// stop closes every connection and ends the loop.
func (l *loop) stop() {
	_ = l.ln.Close()
	l.post(func() { l.stopping = true })
	<-l.done
}

func (l *loop) closeAll() {
	l.mu.Lock()
	l.shut = true
	l.mu.Unlock()
	for _, c := range l.clients {
		l.closeClient(c)
	}
	for _, up := range l.ups {
		if up.fd >= 0 {
			unix.Close(up.fd)
			up.fd = -1
		}
	}
	unix.Close(l.wake)
	unix.Close(l.ep)
}
