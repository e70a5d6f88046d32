package proxy

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"

	"seckill-proxy/router"
)

// subscribeDialTimeout bounds opening a subscriber's upstream connection.
const subscribeDialTimeout = 5 * time.Second

// subscriberCommands may be sent in subscriber mode, as in Redis over RESP2.
var subscriberCommands = map[string]bool{
	"subscribe": true, "psubscribe": true, "ssubscribe": true,
	"unsubscribe": true, "punsubscribe": true, "sunsubscribe": true, "ping": true,
}

// subscribe turns a client connection into a subscriber: the connection is detached from the
// RESP server and bridged to a Redis connection of its own. What Redis pushes is passed back
// raw. As in Redis, once the client has unsubscribed from everything it is an ordinary
// client again (served here, one command at a time), and may subscribe anew.
func (s *Server) subscribe(conn redcon.Conn, sess *router.Session) {
	dc := conn.Detach()
	s.clients.Add(1) // the server stops counting a detached connection
	s.bridges.Add(1)
	go func() {
		defer s.bridges.Done()
		defer s.clients.Add(-1)
		defer dc.Close()
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("subscriber connection panicked; closing it", zap.Any("panic", p), zap.String("remote", dc.RemoteAddr()))
			}
		}()
		// Shutdown ends the connection. Its socket, not dc: closing dc flushes dc's writer,
		// which belongs to the goroutine serving it.
		stop := context.AfterFunc(s.ctx, func() { _ = dc.NetConn().Close() })
		defer stop()
		for sess.Subscribe != nil {
			first, rest := sess.Subscribe, sess.SubscribeRest
			sess.Subscribe, sess.SubscribeRest = nil, nil
			next := s.bridge(dc, first, rest)
			if len(next) == 0 || !s.serveDetached(dc, sess, next) {
				return
			}
		}
	}()
}

// serveDetached serves an ordinary client on a detached connection, from the commands cmds
// on, until it subscribes again (true) or leaves (false).
func (s *Server) serveDetached(dc redcon.DetachedConn, sess *router.Session, cmds [][][]byte) bool {
	for {
		if !s.begin() {
			dc.WriteError(errShuttingDown.Error())
			_ = dc.Flush()
			return false
		}
		s.router.Serve(s.ctx, sess, cmds, dc)
		s.end()
		if dc.Flush() != nil || sess.Quit {
			return false
		}
		if sess.Subscribe != nil {
			return true
		}
		cmd, err := dc.ReadCommand()
		if err != nil || len(cmd.Args) == 0 {
			return false
		}
		cmds = [][][]byte{cmd.Args}
	}
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
func (s *Server) bridge(dc redcon.DetachedConn, first [][]byte, rest [][][]byte) [][][]byte {
	var mu sync.Mutex // the pump and the command loop both write to dc
	write := func(f func()) bool {
		mu.Lock()
		defer mu.Unlock()
		f()
		return dc.Flush() == nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, subscribeDialTimeout)
	sub, err := s.upstream.Subscribe(ctx, first)
	cancel()
	if err != nil {
		write(func() { dc.WriteError("UNAVAILABLE " + err.Error()) })
		return nil
	}
	defer sub.Close()
	stop := context.AfterFunc(s.ctx, sub.Close) // shutdown ends the bridge
	defer stop()

	var leaving atomic.Bool // the client left subscriber mode: closing sub must not close dc
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
					_ = dc.NetConn().Close() // ends the command loop's ReadCommand
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
			if !write(func() { dc.WriteRaw(msg) }) {
				_ = dc.NetConn().Close()
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
			write(func() { dc.WriteString("OK") })
			return false
		case name == "ping":
			return ping(args) == nil
		case subscriberCommands[name]:
			return sub.Send(args) == nil
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
		return write(func() {
			dc.WriteError("ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
		})
	}
	ok := send(first)
	for ok && len(rest) > 0 {
		ok, rest = send(rest[0]), rest[1:]
	}
	for ok {
		cmd, err := dc.ReadCommand()
		if err != nil {
			break
		}
		ok = len(cmd.Args) > 0 && send(cmd.Args)
	}
	leaving.Store(next != nil)
	sub.Close()
	<-pumped
	if next == nil {
		return nil
	}
	// next may sit in dc's read buffer, which nothing reads again before it is served.
	return append([][][]byte{next}, rest...)
}
