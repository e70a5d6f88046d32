package proxy_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"seckill-proxy/internal/resp"
	"seckill-proxy/internal/testenv"
)

// TestBlockingInOrder is the reproduction: client A sends XREAD BLOCK 0 STREAMS s $,
// then client B sends DEL s and XADD s 667-0 f v. Straight to Redis, A gets the entry every
// time, since Redis runs A's XREAD before B's commands. Through the proxy A's command must
// reach Redis before B's too: once a blocking command took its own connection after it was
// read, and B's went first in 14 runs of 20, leaving A blocked for good. 20 runs in a row, in
// front of the cluster and of one server, each against redis-server straight first.
func TestBlockingInOrder(t *testing.T) { eachUpstream(t, testBlockingInOrder) }

func testBlockingInOrder(t *testing.T, s *stack) {
	if s.cfg.Redis.EventLoops == 0 || runtime.GOOS != "linux" {
		// Each client's goroutine reads and sends for itself: which of two clients' commands
		// reaches Redis first is the scheduler's choice (docs/PASSTHROUGH.md says so).
		t.Skip("the order across clients is the event loop's: with a goroutine per client it is the scheduler's")
	}
	direct := testenv.Standalone(t)
	for _, via := range []struct{ name, addr string }{{"redis-server", direct}, {"proxy", s.addr}} {
		t.Run(via.name, func(t *testing.T) {
			a, b := dialRaw(t, via.addr), dialRaw(t, via.addr)
			for run := range 20 {
				stream := newSKU("{order}s")
				send(t, a, "XREAD", "BLOCK", "0", "STREAMS", stream, "$")
				if got := b.do(t, "DEL", stream); got != ":0\r\n" {
					t.Fatalf("run %d: DEL = %q", run, got)
				}
				if got := b.do(t, "XADD", stream, "667-0", "f", "v"); got != "$5\r\n667-0\r\n" {
					t.Fatalf("run %d: XADD = %q", run, got)
				}
				_ = a.c.SetReadDeadline(time.Now().Add(2 * time.Second))
				reply, err := resp.ReadReply(a.r)
				if err != nil {
					t.Fatalf("run %d: A's XREAD got no entry within 2 s (%v): B's commands reached Redis first", run, err)
				}
				if !strings.Contains(string(reply), "667-0") {
					t.Fatalf("run %d: XREAD = %q", run, reply)
				}
				b.do(t, "DEL", stream)
			}
		})
	}
}

// send writes a command without reading its reply.
func send(t *testing.T, c *rawClient, args ...string) {
	t.Helper()
	var cmd strings.Builder
	fmt.Fprintf(&cmd, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&cmd, "$%d\r\n%s\r\n", len(a), a)
	}
	_ = c.c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.c.Write([]byte(cmd.String())); err != nil {
		t.Fatal(err)
	}
}
