package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"
)

// TestOwnConnsBounded: blocking commands, transactions and subscribers hold Redis connections
// of their own within redis.own_conns_share of each master's maxclients and redis.max_own_conns
// in all; past either, the command is answered -BUSY at once, the client's connection goes
// on, and the node keeps its room for everyone else. Before, 1,100 BLPOP clients through one
// proxy filled a node with maxclients 1000, which then refused every client, the proxies' own
// connections and an operator's redis-cli.
func TestOwnConnsBounded(t *testing.T) {
	ctx := context.Background()
	cfg := newConfig(t, nil)
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.Redis.Addrs})
	t.Cleanup(func() { _ = direct.Close() })
	// Keys on two different masters, and what those masters allow.
	var keys []string
	var maxClients []int
	seen := map[string]bool{}
	for i := 0; len(keys) < 2; i++ {
		k := "own:" + xid.New().String() + ":" + strconv.Itoa(i)
		m, err := direct.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if seen[m.Options().Addr] {
			continue
		}
		seen[m.Options().Addr] = true
		v, err := m.ConfigGet(ctx, "maxclients").Result()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(v["maxclients"])
		keys, maxClients = append(keys, k), append(maxClients, n)
	}
	const perMaster, total = 5, 8
	share := (float64(perMaster) + 0.5) / float64(min(maxClients[0], maxClients[1]))
	for _, n := range maxClients {
		if int(share*float64(n)) != perMaster {
			t.Skipf("the masters' maxclients differ (%v): no one share gives %d on both", maxClients, perMaster)
		}
	}
	cfg.Redis.MaxOwnConns, cfg.Redis.OwnConnsShare = total, share
	s := startProxy(t, cfg, true)

	// blpop starts a BLPOP of key for 30 s on a connection of its own, and answers its reply.
	blpop := func(key string) (*rawClient, <-chan string) {
		c := dialRaw(t, s.addr)
		send(t, c, "BLPOP", key, "30")
		out := make(chan string, 1)
		go func() {
			_ = c.c.SetReadDeadline(time.Now().Add(40 * time.Second))
			line, err := c.r.ReadString('\n')
			if err != nil {
				line = "read error: " + err.Error()
			}
			out <- strings.TrimSuffix(line, "\r\n")
		}()
		return c, out
	}
	var held []*rawClient
	for range perMaster {
		c, _ := blpop(keys[0])
		held = append(held, c)
	}
	eventually(t, 5*time.Second, "5 BLPOPs held on the first master", func() bool { return s.field("own_conns") == perMaster })
	c, out := blpop(keys[0])
	if got := <-out; !strings.HasPrefix(got, "-BUSY "+strconv.Itoa(perMaster)+" blocking commands") || !strings.Contains(got, "own_conns_share") {
		t.Fatalf("a 6th BLPOP on one master = %q, want -BUSY (redis.own_conns_share)", got)
	}
	if got := c.do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after the refusal = %q", got)
	}
	for range total - perMaster {
		c, _ := blpop(keys[1])
		held = append(held, c)
	}
	eventually(t, 5*time.Second, "8 held in all", func() bool { return s.field("own_conns") == total })
	// Past the proxy's bound: a transaction, a subscription and a BLPOP are each refused.
	w := dialRaw(t, s.addr)
	if got := w.do(t, "WATCH", keys[1]); !strings.HasPrefix(got, "-BUSY "+strconv.Itoa(total)) || !strings.Contains(got, "max_own_conns") {
		t.Fatalf("WATCH past redis.max_own_conns = %q", got)
	}
	sub := dialRaw(t, s.addr)
	if got := sub.do(t, "SUBSCRIBE", "own:"+xid.New().String()); !strings.HasPrefix(got, "-BUSY") {
		t.Fatalf("SUBSCRIBE past redis.max_own_conns = %q", got)
	}
	if got := sub.do(t, "GET", keys[1]); got != "$-1\r\n" {
		t.Fatalf("GET after the refused SUBSCRIBE = %q: the connection should go on", got)
	}
	if got := s.field("own_conns_refused"); got != 3 {
		t.Fatalf("own_conns_refused = %d, want 3", got)
	}
	// The held ones let go: the room comes back.
	for _, c := range held {
		_ = c.c.Close()
	}
	eventually(t, 10*time.Second, "the held connections given back", func() bool { return s.field("own_conns") == 0 })
	if got := w.do(t, "WATCH", keys[1]); got != "+OK\r\n" {
		t.Fatalf("WATCH once there is room = %q", got)
	}
	if got := w.do(t, "UNWATCH"); got != "+OK\r\n" {
		t.Fatalf("UNWATCH = %q", got)
	}
	_, out = blpop(keys[0])
	if got := s.client(t, 1).RPush(ctx, keys[0], "x").Err(); got != nil {
		t.Fatal(got)
	}
	if got := <-out; got != "*2" {
		t.Fatalf("a BLPOP once there is room = %q, want the element", got)
	}
}
