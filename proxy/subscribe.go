package proxy

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"

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
// RESP server and bridged to a Redis connection of its own, until either side closes. What
// Redis pushes is passed back raw.
func (s *Server) subscribe(conn redcon.Conn, sess *router.Session) {
	first, rest := sess.Subscribe, sess.SubscribeRest
	dc := conn.Detach()
	s.clients.Add(1) // the server stops counting a detached connection
	s.bridges.Add(1)
	go func() {
		defer s.bridges.Done()
		defer s.clients.Add(-1)
		s.bridge(dc, first, rest)
	}()
}

func (s *Server) bridge(dc redcon.DetachedConn, first [][]byte, rest [][][]byte) {
	defer dc.Close()
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
		return
	}
	defer sub.Close()
	stop := context.AfterFunc(s.ctx, sub.Close) // shutdown ends the bridge
	defer stop()
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		for {
			msg, err := sub.Next()
			if err != nil || !write(func() { dc.WriteRaw(msg) }) {
				dc.Close() // ends the command loop's ReadCommand
				return
			}
		}
	}()
	send := func(args [][]byte) bool {
		name := strings.ToLower(string(args[0]))
		switch {
		case name == "quit":
			write(func() { dc.WriteString("OK") })
			return false
		case subscriberCommands[name]:
			return sub.Send(args) == nil
		}
		return write(func() {
			dc.WriteError("ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
		})
	}
	ok := send(first)
	for _, args := range rest {
		if ok {
			ok = send(args)
		}
	}
	for ok {
		cmd, err := dc.ReadCommand()
		if err != nil {
			break
		}
		ok = len(cmd.Args) > 0 && send(cmd.Args)
	}
	sub.Close()
	<-pumped
	s.log.Debug("subscriber left")
}
