//go:build linux

package proxy

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"seckill-proxy/guard"
	"seckill-proxy/router"
)

// loopEnv is the world as a loop's core sees it.
type loopEnv struct{ l *loop }

func (e loopEnv) classify(sess *router.Session, args [][]byte) router.Class {
	return e.l.s.router.Classify(sess, args)
}
func (e loopEnv) peek(sess *router.Session, args [][]byte) router.Class {
	return e.l.s.router.Peek(sess, args)
}
func (e loopEnv) immediate(out []byte, args [][]byte) []byte {
	return e.l.s.router.AppendImmediate(out, args)
}
func (e loopEnv) counted(n int) { e.l.s.router.Counted(n) }
func (e loopEnv) parseBuy(sess *router.Session, cl router.Class, args [][]byte) (guard.BuyRequest, []byte) {
	e.l.s.router.Counted(1)
	return e.l.s.router.ParseBuy(sess, cl, args)
}
func (e loopEnv) begin() bool   { return e.l.s.begin() }
func (e loopEnv) post(f func()) { e.l.post(f) }
func (e loopEnv) end()          { e.l.s.end() }

// dial opens the connection to up's node on a goroutine; commands queue meanwhile.
func (e loopEnv) dial(up *node) {
	l := e.l
	go func() {
		// The connect is bounded by the dial timeout; the login, a command like any other, by
		// the command timeout besides: a node busy with a slow script answers it late.
		ctx, cancel := context.WithTimeout(l.s.ctx, l.s.upstream.DialTimeout()+l.s.upstream.Timeout())
		defer cancel()
		dial := l.s.upstream.Dial
		if up.resp3 {
			dial = l.s.upstream.RESP3().Dial
		}
		if up.owner {
			dial = l.s.upstream.DialOwner
		}
		nc, err := dial(ctx, up.addr)
		if tc, ok := nc.(*tls.Conn); ok && err == nil { // redis.tls: Go reads and writes it
			if !l.post(func() { l.dialedConn(up, tc) }) {
				_ = tc.Close()
			}
			return
		}
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

func (l *loop) dialed(up *node, fd int, err error) {
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
		l.s.log.Warn("cannot connect to Redis", zap.String("addr", up.addr), zap.Error(err))
		l.core.dialFailed(up, err)
		return
	}
	up.fd, up.ev = fd, unix.EPOLLIN
	l.upFDs[fd] = up
	l.core.upConnected(up)
}

// serveSlow runs cmds through the router on a goroutine of their own, in the client's
// context (a blocking command ends when the client goes); the client's later commands wait
// until it is done.
func (e loopEnv) serveSlow(c *client, cmds [][][]byte, ids []router.Class) {
	l := e.l
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
				l.s.router.ServeIdentified(c.ctx, sess, cmds, ids, w)
			}()
		}
		quit = quit || sess.Quit
		l.post(func() {
			if c.closed {
				l.s.router.CloseSession(sess)
			}
			l.core.slowDone(c, w.Buffer(), quit)
		})
	}()
}

// startBlocking sends a blocking command to Redis in the loop's turn, on a spare connection,
// and waits for its reply on a goroutine of its own, in the client's context.
func (e loopEnv) startBlocking(c *client, cl router.Class, args [][]byte) bool {
	l := e.l
	if !l.s.begin() {
		return false // draining: serveSlow answers
	}
	wait, ok := l.s.router.StartBlocking(c.ctx, c.sess, cl, args)
	if !ok {
		l.s.end()
		return false
	}
	go func() {
		out := wait()
		l.s.end()
		l.post(func() {
			if c.closed {
				l.s.router.CloseSession(c.sess)
			}
			l.core.slowDone(c, out, false)
		})
	}()
	return true
}

// followRedirects follows MOVED and ASK replies as the router would, on a goroutine, one at a
// time in the order they came.
func (e loopEnv) monitored(sess *router.Session, args [][]byte) { e.l.s.router.Monitored(sess, args) }

func (e loopEnv) paused(args [][]byte, now time.Time) (time.Time, bool) {
	return e.l.s.router.Paused(args, now)
}

func (e loopEnv) followRedirects(jobs []redirectJob) {
	l := e.l
	go func() {
		for _, j := range jobs {
			args, err := commandOf(j.in.raw)
			var out []byte
			if err != nil {
				out = upstreamUnavailable(err)
			} else {
				ctx, cancel := context.WithTimeout(l.s.ctx, l.core.lim.timeout)
				pass := l.s.upstream
				if j.resp3 {
					pass = pass.RESP3()
				}
				out = pass.Redirect(ctx, j.reply, args)
				cancel()
			}
			l.post(func() { l.core.redirected(j, out) })
		}
		l.post(l.core.redirectsDone)
	}()
}
