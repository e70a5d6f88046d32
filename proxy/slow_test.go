package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/resp"
)

// Commands that block or run long: they delay nobody else, and a client that leaves takes its
// blocked command with it.

// TestBlockingDoesNotHoldUpOthers: one client blocks in BLPOP while another's GETs all finish
// before the BLPOP does.
func TestBlockingDoesNotHoldUpOthers(t *testing.T) { eachUpstream(t, testBlockingDoesNotHoldUpOthers) }

func testBlockingDoesNotHoldUpOthers(t *testing.T, s *stack) {
	blocker, other := dialRaw(t, s.addr), dialRaw(t, s.addr)
	key := "hol:" + xid.New().String()
	done := make(chan string, 1)
	go func() {
		var b strings.Builder
		fmt.Fprintf(&b, "*3\r\n$5\r\nBLPOP\r\n$%d\r\n%s\r\n$1\r\n5\r\n", len(key), key)
		_, _ = blocker.c.Write([]byte(b.String()))
		_ = blocker.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		reply, _ := resp.ReadReply(blocker.r)
		done <- string(reply)
	}()
	for i := range 100 {
		if got := other.do(t, "GET", key+":x"+strconv.Itoa(i)); got != "$-1\r\n" {
			t.Fatalf("GET = %q", got)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("BLPOP returned %q before the other client's GETs were answered", r)
	default:
	}
	other.do(t, "RPUSH", key, "wake")
	if r := <-done; r != fmt.Sprintf("*2\r\n$%d\r\n%s\r\n$4\r\nwake\r\n", len(key), key) {
		t.Fatalf("BLPOP = %q", r)
	}
}

// TestBlockedClientLeaves: a client that leaves while in BLPOP k 0 takes its blocked command
// with it, as with Redis itself: a later RPUSH leaves the element in the list, and Redis has no
// blocked client left.
func TestBlockedClientLeaves(t *testing.T) { eachUpstream(t, testBlockedClientLeaves) }

func testBlockedClientLeaves(t *testing.T, s *stack) {
	key := "{left" + xid.New().String() + "}"
	blocker := dialRaw(t, s.addr)
	if _, err := blocker.c.Write([]byte(respCmd("BLPOP", key, "0"))); err != nil {
		t.Fatal(err)
	}
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.cfg.Redis.Addrs})
	if s.cfg.Redis.Mode == conf.ModeStandalone {
		direct = connect.Redis(s.cfg.Redis)
	}
	defer direct.Close()
	ctx := context.Background()
	blockedClients := func() int64 {
		var n atomic.Int64
		_ = direct.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			info := m.Info(ctx, "clients").Val()
			i := strings.Index(info, "blocked_clients:")
			var b int64
			_, _ = fmt.Sscan(info[i+len("blocked_clients:"):], &b)
			n.Add(b)
			return nil
		})
		return n.Load()
	}
	eventually(t, 5*time.Second, "Redis has the BLPOP blocked", func() bool { return blockedClients() >= 1 })
	_ = blocker.c.Close()
	eventually(t, 5*time.Second, "Redis lets the BLPOP go", func() bool { return blockedClients() == 0 })
	c := dialRaw(t, s.addr)
	if got := c.do(t, "RPUSH", key, "x"); got != ":1\r\n" {
		t.Fatalf("RPUSH = %q", got)
	}
	if got := c.do(t, "LLEN", key); got != ":1\r\n" {
		t.Fatalf("LLEN after the blocked client left = %q, want 1: the element was taken", got)
	}
	c.do(t, "DEL", key)
}

// TestSlowCommandIsolated: a script that runs 1.5 s in Redis (longer than buy.call_timeout)
// returns its reply to its caller, and another client's command on the same node, queued
// behind it, is answered too: a slow command fails nobody.
func TestSlowCommandIsolated(t *testing.T) {
	eachUpstreamWith(t, func(c *conf.Config) { c.Buy.CallTimeout = 300 * time.Millisecond }, testSlowCommandIsolated)
}

func testSlowCommandIsolated(t *testing.T, s *stack) {
	const slowLua = `local t0 = redis.call('TIME')
local start = t0[1] * 1000000 + t0[2]
while true do
  local t = redis.call('TIME')
  if t[1] * 1000000 + t[2] - start >= tonumber(ARGV[1]) then return 1 end
end`
	key := "{slow" + xid.New().String() + "}"
	slow, other := dialRaw(t, s.addr), dialRaw(t, s.addr)
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.cfg.Redis.Addrs})
	if s.cfg.Redis.Mode == conf.ModeStandalone {
		direct = connect.Redis(s.cfg.Redis)
	}
	defer direct.Close()
	ctx := context.Background()
	m, err := direct.MasterForKey(ctx, key+"a")
	if err != nil {
		t.Fatal(err)
	}
	probe := redis.NewClient(&redis.Options{Addr: m.Options().Addr, ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	if err := probe.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := slow.c.Write([]byte(respCmd("EVAL", slowLua, "1", key+"a", "1500000"))); err != nil {
		t.Fatal(err)
	}
	// Redis runs the script: a PING straight to the node gets no answer in 50 ms.
	eventually(t, 5*time.Second, "Redis runs the slow script", func() bool { return probe.Ping(ctx).Err() != nil })
	other.expect(t, respCmd("GET", key+"b"), "$-1\r\n")
	_ = slow.c.SetDeadline(time.Now().Add(10 * time.Second))
	if got, err := resp.ReadReply(slow.r); err != nil || string(got) != ":1\r\n" {
		t.Fatalf("the slow script's reply = %q, %v; want :1", got, err)
	}
}
