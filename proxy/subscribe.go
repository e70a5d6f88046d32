package proxy

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/router"
	"seckill-proxy/upstream"
)

// subscribeDialTimeout bounds opening a subscriber's upstream connection.
const subscribeDialTimeout = 5 * time.Second

// subscriberCommands may be sent in subscriber mode, as in Redis over RESP2.
var subscriberCommands = map[string]bool{
	"subscribe": true, "psubscribe": true, "ssubscribe": true,
	"unsubscribe": true, "punsubscribe": true, "sunsubscribe": true, "ping": true,
}

// lockedWrite returns a write to c for goroutines that share it: each call writes and flushes
// under one lock, and reports whether the flush succeeded.
func lockedWrite(c *clientConn) func(f func(w *redcon.Writer)) bool {
	var mu sync.Mutex
	return func(f func(w *redcon.Writer)) bool {
		mu.Lock()
		defer mu.Unlock()
		f(c.w)
		return c.w.Flush() == nil
	}
}

// serveBetween serves a command of a RESP3 subscriber (which may send any command: it is
// served as any other) and writes its reply between the messages. It runs outside the lock the
// messages take, so that they keep coming while it runs (a BLPOP, a waiting SECKILL.STATUS), as
// Redis pushes to a client blocked in BLPOP; its reply comes after them. It reports whether
// the connection goes on.
func (s *Server) serveBetween(c *clientConn, args [][]byte, write func(f func(w *redcon.Writer)) bool) bool {
	var buf bytes.Buffer
	bw := redcon.NewWriter(&buf)
	s.router.Serve(c.ctx, c.sess, [][][]byte{args}, bw)
	_ = bw.Flush() // into memory: it cannot fail
	return write(func(w *redcon.Writer) { w.WriteRaw(buf.Bytes()) }) && !c.sess.Quit
}

// bridge runs subscriber mode: first is the command that started it, rest the commands that
// came with it. It returns the commands sent after the client left subscriber mode (the first
// one, and any of rest not yet sent; empty, not nil, when a refused SUBSCRIBE never entered
// it), or nil when the connection ended. Whether the client
// still has subscriptions, Redis knows: before a command that subscriber mode does not allow,
// the subscriber asks with PINGs of the proxy's own (upstream.Subscriber.Probe).
func (s *Server) bridge(c *clientConn, first [][]byte, rest [][][]byte) [][][]byte {
	if router.IsMonitor(first) {
		return s.monitorBridge(c, rest)
	}
	if isOutcomeSubscribe(first) {
		return s.outcomeBridge(c, first, rest)
	}
	write := lockedWrite(c) // the pump and the command loop both write to c
	names := subNames{limit: s.limits.MaxChannelBytes}
	if msg := names.take(strings.ToLower(string(first[0])), first); msg != "" {
		write(func(w *redcon.Writer) { w.WriteError(msg) })
		return append([][][]byte{}, rest...)
	}
	ctx, cancel := context.WithTimeout(s.ctx, subscribeDialTimeout)
	resp3 := c.sess.Proto == 3
	sub, err := s.upstream.For(c.sess.Proto).Subscribe(ctx, first)
	cancel()
	if busy := (*upstream.ErrTooManyOwn)(nil); errors.As(err, &busy) {
		// Refused before anything was dialled: the connection goes on, out of subscriber mode.
		write(func(w *redcon.Writer) { w.WriteError(busy.Error()) })
		return append([][][]byte{}, rest...)
	}
	if err != nil {
		write(func(w *redcon.Writer) { w.WriteError("UNAVAILABLE " + err.Error()) })
		return nil
	}
	defer sub.Close()
	stop := context.AfterFunc(c.ctx, sub.Close) // the client gone, or a shutdown, ends the bridge
	defer stop()

	var leaving atomic.Bool // the client left subscriber mode: closing sub must not close c
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		for {
			msg, err := sub.Next()
			if err != nil {
				if !leaving.Load() {
					_ = c.nc.Close() // ends the command loop's readCommand
				}
				return
			}
			if !write(func(w *redcon.Writer) { w.WriteRaw(msg) }) {
				_ = c.nc.Close()
				return
			}
		}
	}()
	var next [][]byte
	// send forwards one command; false ends subscriber mode (see next) or the connection.
	send := func(args [][]byte) bool {
		name := strings.ToLower(string(args[0]))
		switch {
		case name == "quit":
			write(func(w *redcon.Writer) { w.WriteString("OK") })
			return false
		case (name == "subscribe" || name == "ssubscribe") && namesOutcomeChannel(args):
			return write(func(w *redcon.Writer) { w.WriteError(errOutcomeMixed) })
		case subscriberCommands[name]:
			if msg := names.take(name, args); msg != "" {
				return write(func(w *redcon.Writer) { w.WriteError(msg) })
			}
			return sub.Send(c.ctx, args) == nil
		case name == "reset" && len(args) == 1:
			// Redis unsubscribes from everything and answers +RESET: the subscription is
			// closed (its messages so far written first), and RESET served as outside.
			next = args
			return false
		case resp3 && name == "hello" && len(args) > 1 && string(args[1]) != "3":
			// The subscription's own connection to Redis speaks RESP3: its pushes, and the
			// UNSUBSCRIBE replies among them, cannot become RESP2 under way.
			return write(func(w *redcon.Writer) {
				w.WriteError("ERR HELLO " + string(args[1]) + " is refused in subscriber mode through seckill-proxy: the subscription speaks RESP3; UNSUBSCRIBE from everything first")
			})
		case resp3:
			return s.serveBetween(c, args, write)
		}
		still, err := sub.Probe(c.ctx)
		switch {
		case err != nil:
			return false
		case !still:
			next = args
			return false
		}
		return write(func(w *redcon.Writer) { w.WriteError(notInSubscriberMode(name)) })
	}
	rest = serveSubscriber(c, first, rest, send, write)
	leaving.Store(next != nil)
	sub.Close()
	<-pumped
	if next == nil {
		return nil
	}
	return append([][][]byte{next}, rest...)
}

// serveSubscriber feeds a subscriber's commands to send: first (if any), then rest, then what it sends
// next, until send answers false (the end of subscriber mode or of the connection), or the
// client goes or sends what cannot be read (answered as the server would). It returns the
// commands of rest not yet sent.
func serveSubscriber(c *clientConn, first [][]byte, rest [][][]byte, send func([][]byte) bool, write func(func(*redcon.Writer)) bool) [][][]byte {
	ok := first == nil || send(first)
	for ok && len(rest) > 0 {
		ok, rest = send(rest[0]), rest[1:]
	}
	for ok {
		args, err := c.readCommand()
		if err != nil {
			var ce *closingError
			if errors.As(err, &ce) {
				write(func(w *redcon.Writer) { w.WriteRaw(ce.reply) })
			}
			break
		}
		ok = send(args)
	}
	return rest
}

// notInSubscriberMode refuses a command in subscriber mode over RESP2, in Redis's words.
func notInSubscriberMode(name string) string {
	return "ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
}
