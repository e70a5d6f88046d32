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
)

// subscribeDialTimeout bounds opening a subscriber's upstream connection.
const subscribeDialTimeout = 5 * time.Second

// subscriberCommands may be sent in subscriber mode, as in Redis over RESP2.
var subscriberCommands = map[string]bool{
	"subscribe": true, "psubscribe": true, "ssubscribe": true,
	"unsubscribe": true, "punsubscribe": true, "sunsubscribe": true, "ping": true,
}

// subscribedPong starts the reply to PING in subscriber mode.
var subscribedPong = []byte("*2\r\n$4\r\npong\r\n")

// isPingReply: PING answers an array starting with "pong" in subscriber mode, and +PONG or a
// bulk string out of it; nothing else Redis sends a subscriber is a simple or bulk string.
func isPingReply(msg []byte) bool {
	return bytes.HasPrefix(msg, subscribedPong) || len(msg) > 0 && (msg[0] == '+' || msg[0] == '$')
}

// bridge runs subscriber mode: first is the command that started it, rest the commands that
// came with it. It returns the commands sent after the client left subscriber mode (the first
// one, and any of rest not yet sent), or none when the connection ended. Whether the client
// still has subscriptions, Redis knows: before a command that subscriber mode does not allow,
// a PING of the proxy's own asks, and its answer (an array while subscribed, +PONG after) is
// not passed on.
func (s *Server) bridge(c *clientConn, first [][]byte, rest [][][]byte) [][][]byte {
	var mu sync.Mutex // the pump and the command loop both write to c
	write := func(f func(w *redcon.Writer)) bool {
		mu.Lock()
		defer mu.Unlock()
		f(c.w)
		return c.w.Flush() == nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, subscribeDialTimeout)
	resp3 := c.sess.Proto == 3
	sub, err := s.upstream.For(c.sess.Proto).Subscribe(ctx, first)
	cancel()
	if err != nil {
		write(func(w *redcon.Writer) { w.WriteError("UNAVAILABLE " + err.Error()) })
		return nil
	}
	defer sub.Close()
	stop := context.AfterFunc(c.ctx, sub.Close) // the client gone, or a shutdown, ends the bridge
	defer stop()

	var leaving atomic.Bool // the client left subscriber mode: closing sub must not close c
	var pingsMu sync.Mutex
	var pings []bool                 // per PING sent upstream, in order: whether it is the proxy's own
	subscribed := make(chan bool, 1) // the answer to the proxy's PING
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
			if isPingReply(msg) {
				pingsMu.Lock()
				own := len(pings) > 0 && pings[0]
				if len(pings) > 0 {
					pings = pings[1:]
				}
				pingsMu.Unlock()
				if own {
					subscribed <- bytes.HasPrefix(msg, subscribedPong)
					continue
				}
			}
			if !write(func(w *redcon.Writer) { w.WriteRaw(msg) }) {
				_ = c.nc.Close()
				return
			}
		}
	}()
	// ping sends a PING, the client's (args) or the proxy's own (nil).
	ping := func(args [][]byte) error {
		pingsMu.Lock()
		pings = append(pings, args == nil)
		pingsMu.Unlock()
		if args == nil {
			args = [][]byte{[]byte("PING")}
		}
		return sub.Send(args)
	}
	var next [][]byte
	// send forwards one command; false ends subscriber mode (see next) or the connection.
	send := func(args [][]byte) bool {
		name := strings.ToLower(string(args[0]))
		switch {
		case name == "quit":
			write(func(w *redcon.Writer) { w.WriteString("OK") })
			return false
		case name == "ping" && !resp3:
			return ping(args) == nil
		case subscriberCommands[name]:
			return sub.Send(args) == nil
		case resp3 && name == "hello" && len(args) > 1 && string(args[1]) != "3":
			// The subscription's own connection to Redis speaks RESP3: its pushes, and the
			// UNSUBSCRIBE replies among them, cannot become RESP2 under way.
			return write(func(w *redcon.Writer) {
				w.WriteError("ERR HELLO " + string(args[1]) + " is refused in subscriber mode through seckill-proxy: the subscription speaks RESP3; UNSUBSCRIBE from everything first")
			})
		case resp3:
			// In RESP3 a subscribed client may send any command: it is served as any other,
			// and its reply goes between the messages.
			return write(func(w *redcon.Writer) { s.router.Serve(c.ctx, c.sess, [][][]byte{args}, w) }) && !c.sess.Quit
		}
		if ping(nil) != nil {
			return false
		}
		select {
		case still := <-subscribed:
			if !still {
				next = args
				return false
			}
		case <-pumped:
			return false
		}
		return write(func(w *redcon.Writer) {
			w.WriteError("ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
		})
	}
	ok := send(first)
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
	leaving.Store(next != nil)
	sub.Close()
	<-pumped
	if next == nil {
		return nil
	}
	return append([][][]byte{next}, rest...)
}
