package upstream

import (
	"bufio"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/internal/connect"
)

// TestStaleConnectionSentAgain: a lane's connection that the node closed while it idled (a
// node restarted) is not handed back as an error to the command that finds it so: the
// command goes once more, on a new connection, and is answered. (Seen with ioredis: PING and
// GET answered "UNAVAILABLE write ... broken pipe" minutes after the node was back.)
func TestStaleConnectionSentAgain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var conns atomic.Int32
	closed := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil { // *1
						return
					}
					_, _ = r.ReadString('\n') // $4
					_, _ = r.ReadString('\n') // PING
					if _, err := c.Write([]byte("+PONG\r\n")); err != nil {
						return
					}
					if n == 1 {
						_ = c.Close()
						closed <- struct{}{}
						return // the node restarts: its connections close after the first reply
					}
				}
			}()
		}
	}()
	n := newNode(ln.Addr().String(), 1, connect.Dialer{Timeout: time.Second}, nil, 0, time.Second, zap.NewNop())
	t.Cleanup(n.close)
	ping := [][][]byte{{[]byte("PING")}}
	for i := range 3 {
		replies, err := n.lanes.do(context.Background(), time.Now().Add(2*time.Second), ping)
		if err != nil || len(replies) != 1 || string(replies[0]) != "+PONG\r\n" {
			t.Fatalf("PING %d after the node closed the idle connection: %q, %v", i+1, replies, err)
		}
		if i == 0 {
			<-closed // the node closed the lane's connection while it idled
		}
	}
	if got := conns.Load(); got != 2 {
		t.Fatalf("%d connections made, want 2 (one closed by the node, one new)", got)
	}
}
