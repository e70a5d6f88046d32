package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/proxy"
)

// Hostile clients (issue 72): what one request can make the proxy, or the Redis behind it,
// do to everyone else.

// chainScript is a script whose names depend on each other along 2^k paths: each line gives
// a name the one before it twice, and the loop's bound asks for the last one. At k = 30, its
// 729 bytes held a proxy's event loop for ever (the cost model worked the bound out once per
// path). It runs one step.
func chainScript(k int) string {
	var b strings.Builder
	b.WriteString("local a0 = 1\n")
	for i := 1; i <= k; i++ {
		fmt.Fprintf(&b, "local a%d = a%d + a%d\n", i, i-1, i-1)
	}
	fmt.Fprintf(&b, "for i = 1, a%d - a%[1]d + 1 do local x = string.find('x', 'x') end\nreturn 1\n", k)
	return b.String()
}

// TestScriptCheckerBounded: the chain script is judged in time bounded by its size, off the
// event loop, from a client that need not log in (no users: every client is an admin, whose
// scripts are judged for the verdicts kept) and from an app user: it runs (fueled, for the app
// user), and meanwhile another client's PINGs and GETs through the same proxy are answered
// and /readyz says ready. Run on a private redis-server.
func TestScriptCheckerBounded(t *testing.T) {
	addr, startRedis := ownRedis(t)
	startRedis()
	for name, users := range map[string][]conf.User{
		"no users": nil,
		"app user": {{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}, {Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}},
	} {
		t.Run(name, func(t *testing.T) {
			s := startOn(t, addr, func(c *conf.Config) { c.Users = users })
			ctx := context.Background()
			opt := func() *redis.Options { return &redis.Options{Addr: s.addr, PoolSize: 1, MaxRetries: -1} }
			attacker, victim := opt(), opt()
			if users != nil {
				attacker.Username, attacker.Password = "shop", "shop-pw"
				victim.Username, victim.Password = "ops", "ops-pw"
			}
			a, v := redis.NewClient(attacker), redis.NewClient(victim)
			t.Cleanup(func() { _ = a.Close(); _ = v.Close() })
			if err := v.Set(ctx, "hostile:chain", "x", 0).Err(); err != nil {
				t.Fatal(err)
			}
			src := chainScript(30)
			if len(src) > 800 {
				t.Fatalf("the chain is %d bytes", len(src))
			}
			answered := make(chan error, 1)
			go func() { answered <- a.Eval(ctx, src, nil).Err() }()
			for i := 0; i < 20; i++ {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := v.Ping(pctx).Err()
				if err == nil {
					err = v.Get(pctx, "hostile:chain").Err()
				}
				cancel()
				if err != nil {
					t.Fatalf("another client's PING or GET while the chain is judged: %v", err)
				}
			}
			rec := httptest.NewRecorder()
			s.admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("/readyz: %d %s", rec.Code, rec.Body)
			}
			select {
			case err := <-answered:
				if err != nil {
					t.Fatalf("the chain script: %v, want it to run", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the chain script had no answer in 30 s")
			}
		})
	}
}

// TestScriptsChargedForWhatTheyCopy: an app user's script pays at run time for what Redis
// hands it and what it asks Redis to allocate, and a plain command for what its arguments
// make Redis allocate. On a private redis-server under maxmemory 64mb: 249 GETs of a 16 MiB
// value (which held a master 16 s) stop by redis.app_script_time, and meanwhile the master
// answers PING within a second; a loop-free doubling chain over a 1 KiB value is refused;
// SRANDMEMBER with a count of -5,000,000 and SETRANGE at a 256 MiB offset stop in a script and
// are refused as plain commands; the master's memory stays under maxmemory + 64 MiB, and it
// still answers a GET through the proxy.
func TestScriptsChargedForWhatTheyCopy(t *testing.T) {
	addr, startRedis := ownRedis(t)
	startRedis()
	ctx := context.Background()
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = direct.Close() })
	if err := direct.ConfigSet(ctx, "maxmemory", "64mb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := direct.SetRange(ctx, "hostile:big", 16<<20-1, "x").Err(); err != nil {
		t.Fatal(err)
	}
	direct.Set(ctx, "hostile:small", strings.Repeat("y", 1024), 0)
	direct.SAdd(ctx, "hostile:set", "a", "b", "c")
	s := startOn(t, addr, func(c *conf.Config) {
		c.Users = []conf.User{{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}}
	})
	shop := redis.NewClient(&redis.Options{Addr: s.addr, Username: "shop", Password: "shop-pw", PoolSize: 2, MaxRetries: -1, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = shop.Close() })
	stopped := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "script stopped by seckill-proxy") {
			t.Errorf("%s: %v, want the meter to stop it", what, err)
		}
	}

	done := make(chan error, 1)
	go func() {
		done <- shop.Eval(ctx, "for i = 1, 249 do redis.call('GET', KEYS[1]) end return 1", []string{"hostile:big"}).Err()
	}()
	for i := 0; i < 5; i++ {
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := direct.Ping(pctx).Err()
		cancel()
		if took := time.Since(start); err != nil || took > time.Second {
			t.Fatalf("the master's PING while 249 GETs of 16 MiB run: %v after %v", err, took)
		}
	}
	stopped("249 GETs of a 16 MiB value", <-done)

	var chain strings.Builder
	chain.WriteString("local a0 = redis.call('GET', KEYS[1])\n")
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&chain, "local a%d = a%d .. a%[2]d\n", i, i-1)
	}
	chain.WriteString("return #a20")
	if err := shop.Eval(ctx, chain.String(), []string{"hostile:small"}).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "copies") {
		t.Errorf("a doubling chain over 1 KiB: %v, want NOPERM naming the copies", err)
	}
	stopped("SRANDMEMBER -5000000 in a script", shop.Eval(ctx, "return redis.call('SRANDMEMBER', KEYS[1], -5000000)", []string{"hostile:set"}).Err())
	stopped("SETRANGE at 256 MiB in a script", shop.Eval(ctx, "return redis.call('SETRANGE', KEYS[1], 268435455, 'x')", []string{"hostile:range"}).Err())
	for _, cmd := range [][]any{{"SRANDMEMBER", "hostile:set", -5000000}, {"SETRANGE", "hostile:range", 268435455, "x"}, {"SETBIT", "hostile:range", 4294967295, 1}} {
		if err := shop.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "limits.max_alloc_bytes") {
			t.Errorf("%v as a plain command: %v, want a refusal naming limits.max_alloc_bytes", cmd, err)
		}
	}
	mem, err := direct.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(mem, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory_peak:"); ok {
			if n, _ := strconv.ParseInt(v, 10, 64); n > (64+64)<<20 {
				t.Errorf("the master's memory peaked at %d bytes, over maxmemory + 64 MiB", n)
			}
		}
	}
	if n, err := direct.Exists(ctx, "hostile:range").Result(); err != nil || n != 0 {
		t.Errorf("hostile:range exists (%d, %v): an allocation got through", n, err)
	}
	if got, err := shop.StrLen(ctx, "hostile:small").Result(); err != nil || got != 1024 {
		t.Errorf("a GET through the proxy afterwards: %d, %v", got, err)
	}
}

// TestUnreadRepliesBounded: 300 connections that each pipeline 8 GETs of a 1 MiB value and
// never read make neither the master nor the proxy hold their replies: the master's output
// buffers for its clients stay within the proxy's window (limits.reply_buffers, 8 MiB here,
// plus one reply), the proxy's heap under 256 MiB, and another client's PING and GET through
// the proxy are answered meanwhile. Before, 2,000 such connections made the master hold 3.8 GB
// for the proxy's connections in 22 s. Run on a private redis-server, in the server mode
// the run uses (CI runs the package in both).
func TestUnreadRepliesBounded(t *testing.T) {
	addr, startRedis := ownRedis(t)
	startRedis()
	ctx := context.Background()
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = direct.Close() })
	if err := direct.SetRange(ctx, "hostile:big", 1<<20-1, "x").Err(); err != nil {
		t.Fatal(err)
	}
	direct.Set(ctx, "hostile:small", "s", 0)
	const window = 8 << 20
	s := startOn(t, addr, func(c *conf.Config) {
		c.Limits.ReplyBuffers = window
		c.Limits.MaxClients = 1000
	})
	victim := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = victim.Close() })
	if err := victim.Get(ctx, "hostile:small").Err(); err != nil {
		t.Fatal(err)
	}
	pipeline := strings.Repeat(respCmd("GET", "hostile:big"), 8)
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for range 300 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		if _, err := c.Write([]byte(pipeline)); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	var most int64
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		most = max(most, outputBuffers(t, direct))
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		if err := victim.Ping(pctx).Err(); err != nil {
			t.Fatalf("another client's PING: %v", err)
		}
		if err := victim.Get(pctx, "hostile:small").Err(); err != nil {
			t.Fatalf("another client's GET: %v", err)
		}
		cancel()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > 256<<20 {
			t.Fatalf("the proxy's heap holds %d MiB", ms.HeapInuse>>20)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if limit := int64(window + window/4 + 2<<20); most > limit {
		t.Errorf("the master held %d bytes of replies for its clients, over the window's %d", most, limit)
	}
	t.Logf("the master held at most %d KiB of replies for its clients", most>>10)
}

// outputBuffers is the bytes of replies a Redis server holds for all its clients (CLIENT
// LIST's omem).
func outputBuffers(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range strings.Fields(list) {
		if v, ok := strings.CutPrefix(f, "omem="); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			total += n
		}
	}
	return total
}

// TestHandshakesHoldNoSlots: connections to tls_listen that never begin their handshake take
// no client slot, and are closed within the handshake's bound: with limits.max_clients at 50
// and 300 such connections open, plaintext clients and a TLS client are served, and every
// idle one is closed by the proxy within a few seconds (before, 10,000 of them held every
// slot for 10 s).
func TestHandshakesHoldNoSlots(t *testing.T) {
	certs := testenv.TLS(t)
	s := startStandalone(t, func(c *conf.Config) {
		c.TLSListen = "127.0.0.1:0"
		c.TLS = conf.ServerTLS{CertFile: filepath.Join(certs, "server.pem"), KeyFile: filepath.Join(certs, "server.key")}
		c.Limits.MaxClients = 50
	})
	var idle []net.Conn
	t.Cleanup(func() {
		for _, c := range idle {
			_ = c.Close()
		}
	})
	for range 300 {
		c, err := net.Dial("tcp", s.tlsAddr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	ctx := context.Background()
	for i := range 20 {
		c := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 1, MaxRetries: -1})
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("plaintext client %d with 300 idle TLS connections open: %v", i, err)
		}
		_ = c.Close()
	}
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	start := time.Now()
	closed := 0
	for _, c := range idle {
		_ = c.SetReadDeadline(start.Add(proxy.HandshakeTimeout + 3*time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
	}
	if closed != len(idle) {
		t.Fatalf("%d of %d idle TLS connections closed by the proxy within %v", closed, len(idle), time.Since(start))
	}
	tc := redis.NewClient(&redis.Options{Addr: s.tlsAddr, TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}, PoolSize: 1})
	defer tc.Close()
	if err := tc.Ping(ctx).Err(); err != nil {
		t.Fatalf("a TLS client once the idle ones are gone: %v", err)
	}
}

// TestChannelNamesBounded: the channel names one connection holds subscribed are bounded
// (limits.max_channel_bytes, 1 MiB by default): one SUBSCRIBE of 1,000 names of 64 KiB is
// refused whole, naming the setting, and what reading it took is let go while the connection
// stays open (before, 4 such connections held 747 MiB to 1.3 GB of the proxy's memory);
// channels subscribed one at a time are refused past the bound, an UNSUBSCRIBE gives its
// names back, and the connection goes on.
func TestChannelNamesBounded(t *testing.T) {
	s := startStandalone(t, nil)
	name := func(prefix string, i int) string {
		n := fmt.Sprintf("%s-%d-", prefix, i)
		return n + strings.Repeat("x", 64<<10-len(n))
	}
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	for c := range 4 {
		conn, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
		args := []string{"SUBSCRIBE"}
		for i := range 1000 {
			args = append(args, name(fmt.Sprintf("big%d", c), i))
		}
		if _, err := conn.Write([]byte(respCmd(args...))); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		reply, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.HasPrefix(reply, "-ERR") || !strings.Contains(reply, "limits.max_channel_bytes") {
			t.Fatalf("SUBSCRIBE of 1,000 names of 64 KiB: %q, %v", reply, err)
		}
	}
	eventually(t, 10*time.Second, "the memory of the refused SUBSCRIBEs let go", func() bool {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse < 128<<20
	})

	sub := dialRaw(t, s.addr)
	subscribe := func(what string, args ...string) string {
		t.Helper()
		reply := sub.do(t, args...)
		if strings.HasPrefix(reply, "-") && !strings.Contains(reply, "limits.max_channel_bytes") {
			t.Fatalf("%s: %q", what, reply)
		}
		return reply
	}
	for i := range 16 {
		if reply := subscribe("a channel of 64 KiB", "SUBSCRIBE", name("one", i)); strings.HasPrefix(reply, "-") {
			t.Fatalf("channel %d of 64 KiB, within 1 MiB: %q", i+1, reply)
		}
	}
	if reply := subscribe("the 17th", "SUBSCRIBE", name("one", 16)); !strings.HasPrefix(reply, "-ERR") {
		t.Fatalf("the 17th channel of 64 KiB, past 1 MiB: %q, want the bound's error", reply[:min(len(reply), 80)])
	}
	if reply := subscribe("an UNSUBSCRIBE", "UNSUBSCRIBE", name("one", 0)); strings.HasPrefix(reply, "-") {
		t.Fatalf("UNSUBSCRIBE: %q", reply)
	}
	if reply := subscribe("after room was made", "SUBSCRIBE", name("one", 16)); strings.HasPrefix(reply, "-") {
		t.Fatalf("a channel after an UNSUBSCRIBE made room: %q", reply)
	}
	if reply := sub.do(t, "PING"); !strings.Contains(reply, "pong") {
		t.Fatalf("the subscriber's PING after the refusals: %q", reply)
	}
}
