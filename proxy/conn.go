package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"

	"seckill-proxy/internal/resp"
	"seckill-proxy/router"
)

// clientConn is a client served by a goroutine of its own: a buyer or a subscriber that the
// event loop handed over, or every client when there is no event loop. It reads with the same
// resp.Reader, and so the same limits, as the loop. It is used by its goroutine only (and,
// in subscriber mode, its writer under the bridge's lock), and a reading goroutine that
// notices when the client goes, even while a command of its runs.
type clientConn struct {
	nc     net.Conn
	rd     *resp.Reader
	w      *redcon.Writer
	sess   *router.Session
	maxReq int

	// ctx ends when the client goes (or the server stops): a blocking command of its ends too.
	ctx    context.Context
	cancel context.CancelFunc
	// chunks carries what reading read; free gives its buffers back. readErr is why reading
	// ended, set before chunks is closed.
	chunks, free chan []byte
	readErr      error
	// shut: the client shut its sending side (reading met EOF); what it sent is still served.
	// blockingRuns: a batch with a blocking command runs for it. Either side that sets its
	// flag and then finds the other's ends ctx: a shut client waits for no BLPOP.
	shut, blockingRuns atomic.Bool
	// rw counts its replies in the server's replyBudget as they are written; win bounds the
	// commands of one batch by their replies' size, as a loop's client's are.
	rw  *replyWriter
	win window
	// ids is a batch's commands as the router identified them, and hashes and charges its
	// place in the server's sharedAsk, reused from one to the next.
	ids     []router.Class
	hashes  []uint64
	charges []askCharge
	// mem is told when a big command's buffer is let go (nil: not told).
	mem *memReleaser
}

// connReadSize and connReadBuffers: what one client read ahead may hold.
const (
	connReadSize    = 8 << 10
	connReadBuffers = 2
)

func newClientConn(parent context.Context, nc net.Conn, sess *router.Session, maxArgBytes int, budget *replyBudget) *clientConn {
	ctx, cancel := context.WithCancel(parent)
	rw := &replyWriter{nc: nc, b: budget}
	c := &clientConn{nc: nc, rd: resp.NewReader(int64(maxArgBytes)), w: redcon.NewWriter(rw), rw: rw, sess: sess,
		maxReq: maxArgBytes + 1<<20, ctx: ctx, cancel: cancel,
		chunks: make(chan []byte, connReadBuffers), free: make(chan []byte, connReadBuffers)}
	for range connReadBuffers {
		c.free <- make([]byte, connReadSize)
	}
	return c
}

// reading reads the client into the free buffers and hands each to batch, until the client
// goes or sends something unreadable; then it closes chunks. A client that only shut its
// sending side (EOF) is still answered what it sent, unless a blocking command waits for it;
// otherwise reading ends the client's context, so that what runs for it stops (Redis unblocks
// a BLPOP whose client has gone, and so does the proxy).
func (c *clientConn) reading() {
	defer close(c.chunks)
	defer func() {
		if !errors.Is(c.readErr, io.EOF) {
			c.cancel()
			return
		}
		c.shut.Store(true)
		if c.blockingRuns.Load() {
			c.cancel()
		}
	}()
	for buf := range c.free {
		n, err := c.nc.Read(buf[:cap(buf)])
		if n > 0 {
			c.chunks <- buf[:n]
		} else {
			c.free <- buf
		}
		if err != nil {
			c.readErr = err
			return
		}
	}
}

// closingError ends a connection once its reply is written: a protocol error, a request too
// large.
type closingError struct{ reply []byte }

func (e *closingError) Error() string { return strings.TrimSpace(string(e.reply[1:])) }

// batch returns the commands the client has sent, reading until there is at least one: at most
// max, and only one while the client has not logged in (an AUTH changes the limits on what
// follows). Each command's arguments point into the reader's buffer, valid until the next
// batch. A malformed request comes as a *closingError, after the commands before it.
func (c *clientConn) batch(max int) ([][][]byte, error) {
	var cmds [][][]byte
	for {
		for len(cmds) < max {
			cmd, ok, err := c.rd.Next(!c.sess.Authed)
			if err != nil {
				if len(cmds) > 0 {
					return cmds, nil // served first; the error comes again
				}
				return nil, &closingError{redcon.AppendError(nil, "ERR "+err.Error())}
			}
			if !ok {
				break
			}
			cmds = append(cmds, append([][]byte(nil), cmd.Args...))
			if !c.sess.Authed {
				return cmds, nil
			}
		}
		if len(cmds) > 0 {
			return cmds, nil
		}
		if c.rd.Buffered() > c.maxReq {
			return nil, &closingError{tooLargeReply(int64(c.maxReq))}
		}
		held := c.rd.Cap()
		c.rd.Release()
		if held >= bigBuffer && c.rd.Cap() < held && c.mem != nil {
			c.mem.freed() // a big command, served: its memory may go back (memrelease.go)
		}
		chunk, ok := <-c.chunks
		if !ok {
			return nil, c.readErr
		}
		_, _ = c.rd.Write(chunk)
		c.free <- chunk
	}
}

// readCommand returns the next command, copied.
func (c *clientConn) readCommand() ([][]byte, error) {
	cmds, err := c.batch(1)
	if err != nil {
		return nil, err
	}
	return router.CopyArgs(cmds[0]), nil
}

// serveConn serves one client until it leaves, the server stops, or it sends what ends a
// connection. pending is what it sent that is not served yet. The client is counted already;
// serveConn gives back its count and its session.
func (s *Server) serveConn(nc net.Conn, sess *router.Session, pending []byte) {
	defer s.conns.Done()
	defer s.clients.Add(-1)
	defer s.router.CloseSession(sess)
	defer nc.Close()
	if !s.track(nc, true) {
		return
	}
	defer s.track(nc, false)
	defer func() {
		// A bug in one command must not take every client down: drop this one, log why.
		if p := recover(); p != nil {
			s.log.Error("command panicked; closing its connection", zap.Any("panic", p), zap.String("remote", nc.RemoteAddr().String()))
		}
	}()
	c := newClientConn(s.ctx, nc, sess, s.limits.MaxArgBytes, &s.replies)
	c.mem, c.rw.asks = s.mem, s.asks
	defer c.cancel()
	go c.reading() // ends once nc is closed
	_, _ = c.rd.Write(pending)
	var cmds [][][]byte
	for ok := true; ok; {
		if len(cmds) == 0 {
			if cmds, ok = s.nextBatch(c); !ok {
				return
			}
		}
		cmds, ok = s.serveBatch(c, cmds)
	}
}

// nextBatch reads the client's next commands; false when the connection ends (a reply that
// closes it, such as a request too large, is written first).
func (s *Server) nextBatch(c *clientConn) ([][][]byte, bool) {
	cmds, err := c.batch(min(s.limits.MaxPipeline, c.win.size()))
	if err == nil {
		return cmds, true
	}
	var ce *closingError
	if errors.As(err, &ce) {
		c.w.WriteRaw(ce.reply)
		_ = c.w.Flush()
	} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("client connection ended", zap.String("remote", c.nc.RemoteAddr().String()), zap.Error(err))
	}
	return nil, false
}

// serveBatch serves cmds and writes their replies; it returns the commands to serve next (a
// subscriber mode's last), and false when the connection ends.
func (s *Server) serveBatch(c *clientConn, cmds [][][]byte) ([][][]byte, bool) {
	sess := c.sess
	// CLIENT PAUSE: the batch waits while the pause holds any of its commands (a read
	// pipelined with a write waits with it).
	if !s.router.AwaitPause(c.ctx, cmds) {
		return nil, false
	}
	if !s.begin() {
		c.w.WriteError(errShuttingDown.Error())
		_ = c.w.Flush()
		return nil, false
	}
	// Each command identified once, here, for the router too.
	ids, mayBlock := c.ids[:0], false
	hs := c.hashes[:0]
	for _, args := range cmds {
		id := s.router.Identify(args)
		ids, mayBlock = append(ids, id), mayBlock || id.Blocks
		if !id.Own() { // only what passes through asks Redis for replies of any size
			hs = append(hs, askKey(args))
		}
	}
	if mayBlock {
		hs = hs[:0] // a blocking command may hold its charge for ever, and its key's size with it
	}
	c.hashes = hs
	charges, ok := s.asks.take(c.ctx, hs, c.charges[:0])
	c.charges = charges[:0]
	if !ok {
		c.w.WriteError(errShuttingDown.Error())
		_ = c.w.Flush()
		s.end()
		return nil, false
	}

	c.blockingRuns.Store(mayBlock)
	if mayBlock && c.shut.Load() {
		c.cancel()
	}
	s.router.ServeIdentified(c.ctx, sess, cmds, ids, c.w)
	clear(ids) // they point into the batch's buffer
	c.ids = ids[:0]
	c.blockingRuns.Store(false)    // a shut met after this batch must not cancel the next one
	if mayBlock && c.shut.Load() { // forgotten, as Redis forgets it: no reply
		s.asks.give(charges, 0)
		s.end()
		return nil, false
	}
	err := c.w.Flush() // before end: a shutdown closes the connection once all are done
	s.asks.give(charges, c.rw.wrote)
	s.end()
	c.win.learn(c.rw.wrote, len(cmds)) // what this batch's replies weighed (one flush)
	if err != nil || sess.Quit {
		return nil, false
	}
	if sess.Subscribe == nil {
		return nil, true
	}
	first, rest := sess.Subscribe, sess.SubscribeRest
	sess.Subscribe, sess.SubscribeRest = nil, nil
	sess.SetSubscriber(true)
	next := s.bridge(c, first, rest)
	sess.SetSubscriber(false)
	return next, next != nil
}

// track adds nc to the connections that Shutdown closes (false: the server is stopping), or
// takes it out.
func (s *Server) track(nc net.Conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.open, nc)
		return true
	}
	if s.stopping {
		return false
	}
	s.open[nc] = struct{}{}
	return true
}

// acceptOne accepts the next client on ln and admits it under the client bound (tlsFirst:
// under the handshakes' bound, the client bound once its handshake is done): nc nil when
// none was taken this time (an accept error, or a client refused, who was told why); ok false
// once ln is closed.
func (s *Server) acceptOne(ln net.Listener, tlsFirst bool) (nc net.Conn, ok bool) {
	nc, err := ln.Accept()
	if err != nil {
		if errors.Is(err, net.ErrClosed) {
			return nil, false
		}
		s.acceptLog.Do(func() { s.log.Warn("accept failed (logged at most once a second)", zap.Error(err)) })
		time.Sleep(5 * time.Millisecond) // out of file descriptors, say: do not spin
		return nil, true
	}
	switch {
	case tlsFirst && !s.admitHandshake(): // a client slot is taken once the handshake is done
		nc.Close()
		return nil, true
	case tlsFirst:
	default:
		if err := s.admit(); err != nil {
			_, _ = nc.Write(redcon.AppendError(nil, err.Error()))
			nc.Close()
			return nil, true
		}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(clientSendBuffer)
	}
	return nc, true
}

// clientSendBuffer is each client socket's send buffer (SO_SNDBUF, which the kernel doubles
// and no longer grows on its own). Replies a client does not read wait in it, outside the
// proxy's reply_buffers: with the kernel's own sizing, 2,000 clients that never read held 1.5
// GB of socket memory, past the kernel's TCP pressure mark, and every connection on the machine
// (Redis's to the proxy, a victim's) stalled 1.4 s at a time. 128 KiB still carries a large
// value at memory speed over loopback or a data centre's network.
const clientSendBuffer = 128 << 10

// serveGoroutines accepts clients on ln and serves each from a goroutine of its own, until
// the listener is closed; with tc, over TLS (ServeTLS).
func (s *Server) serveGoroutines(ln net.Listener, tc *tls.Config) error {
	for {
		nc, ok := s.acceptOne(ln, tc != nil)
		if !ok {
			return nil
		}
		if nc == nil {
			continue
		}
		sess := s.router.NewSession(nc.RemoteAddr().String())
		s.conns.Add(1)
		if tc != nil {
			go s.serveTLSConn(tls.Server(nc, tc), sess)
			continue
		}
		sess.SetConn(nc.LocalAddr().String(), -1, func() { _ = nc.Close() })
		go s.serveConn(nc, sess, nil)
	}
}

// tooLargeReply is the error a client gets before it is disconnected for sending more than max
// bytes without completing a command.
func tooLargeReply(max int64) []byte {
	return []byte("-ERR request of more than " + strconv.FormatInt(max, 10) +
		" bytes without a complete command (limits.max_arg_bytes); closing\r\n")
}
