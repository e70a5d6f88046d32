package proxy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/xid"

	"seckill-proxy/conf"
	"seckill-proxy/internal/resp"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/router"
)

// The event loop serves a standalone upstream's clients; these tests run against one. The
// differential scripts (TestStandaloneUpstream) and the tests run for both upstreams
// (eachUpstream) cover it too.

func startStandalone(t *testing.T, mutate func(*conf.Config)) *stack {
	t.Helper()
	return startOn(t, testenv.Standalone(t), mutate)
}

// startOn starts a proxy in front of the standalone server at addr.
func startOn(t *testing.T, addr string, mutate func(*conf.Config)) *stack {
	t.Helper()
	return start(t, func(c *conf.Config) {
		c.Redis.Mode, c.Redis.Addrs = conf.ModeStandalone, []string{addr}
		if mutate != nil {
			mutate(c)
		}
	})
}

// eachUpstream runs f against a proxy in front of the cluster (redcon, a goroutine per
// client) and one in front of the standalone server (the event loop).
func eachUpstream(t *testing.T, f func(t *testing.T, s *stack)) { eachUpstreamWith(t, nil, f) }

// eachUpstreamWith is eachUpstream with the configuration changed by mutate.
func eachUpstreamWith(t *testing.T, mutate func(*conf.Config), f func(t *testing.T, s *stack)) {
	t.Run("cluster", func(t *testing.T) { f(t, start(t, mutate)) })
	t.Run("standalone", func(t *testing.T) { f(t, startStandalone(t, mutate)) })
}

func respCmd(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// send writes raw in one write and reads one reply per want, comparing each.
func (rc *rawClient) expect(t *testing.T, raw string, want ...string) {
	t.Helper()
	_ = rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.c.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got, err := resp.ReadReply(rc.r)
		if err != nil || string(got) != w {
			t.Fatalf("reply %d = %q, %v; want %q", i, got, err, w)
		}
	}
}

// expectClosed reads until the proxy closes the connection, which must come with nothing
// more than rest. A close with input unread comes as a reset, after rest.
func (rc *rawClient) expectClosed(t *testing.T, rest string) {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(rc.r)
	if (err != nil && !errors.Is(err, syscall.ECONNRESET)) || string(got) != rest {
		t.Fatalf("before the close: %q, %v; want %q", got, err, rest)
	}
}

// TestLoopPipelineOrder: one read mixing commands the loop forwards itself, commands the
// router serves (the proxy's own, connection state, a transaction) and inline commands is
// answered in order, and the connection's state carries from one to the next. In front of a
// cluster, a pipeline's commands go to several masters at once and come back in its order.
func TestLoopPipelineOrder(t *testing.T) { eachUpstream(t, testLoopPipelineOrder) }

func testLoopPipelineOrder(t *testing.T, s *stack) {
	c := dialRaw(t, s.addr)
	k := "loop:" + xid.New().String()
	raw := respCmd("SET", k, "1") + respCmd("CLIENT", "SETNAME", "app") + respCmd("INCR", k) + respCmd("CLIENT", "GETNAME") +
		respCmd("GET", k) + respCmd("ECHO", "hi") + respCmd("MULTI") + respCmd("INCR", k) + respCmd("EXEC") +
		"GET " + k + "\r\n" + respCmd("SECKILL.STATUS", "nosku", "u") + respCmd("GET", k) + "PING\r\n" + respCmd("SET", "seckill:{loop}:x", "1") + respCmd("DEL", k)
	c.expect(t, raw, "+OK\r\n", "+OK\r\n", ":2\r\n", "$3\r\napp\r\n", "$1\r\n2\r\n", "$2\r\nhi\r\n",
		"+OK\r\n", "+QUEUED\r\n", "*1\r\n:3\r\n", "$1\r\n3\r\n", "$4\r\nnone\r\n", "$1\r\n3\r\n", "+PONG\r\n",
		"-"+router.ProtectedKeysError+"\r\n", ":1\r\n")
	// A buyer is handed over to a goroutine of its own, with the rest of its pipeline.
	sku := newSKU("loop")
	s.sale(t, s.client(t, 1), sku, 1)
	buyer := dialRaw(t, s.addr)
	_ = buyer.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := buyer.c.Write([]byte(respCmd("SET", k, "b") + respCmd("SECKILL.BUY", sku, "u1") + respCmd("GET", k) +
		respCmd("SECKILL.BUY", sku, "u2") + respCmd("DEL", k))); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 5 {
		r, err := resp.ReadReply(buyer.r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(r))
	}
	if got[0] != "+OK\r\n" || !strings.HasPrefix(got[1], "$") || got[2] != "$1\r\nb\r\n" ||
		got[3] != "-SOLDOUT "+sku+"\r\n" || got[4] != ":1\r\n" {
		t.Fatalf("buyer's pipeline = %q", got)
	}
	// Many clients, each with a pipeline of its own, get their own replies in order.
	const clients, depth = 20, 50
	conns := make([]*rawClient, clients)
	for i := range conns {
		conns[i] = dialRaw(t, s.addr)
	}
	key := func(i, j int) string { return fmt.Sprint(k, ":", i, ".", j) } // slots all over
	for i, cc := range conns {
		var b strings.Builder
		for j := range depth {
			b.WriteString(respCmd("SET", key(i, j), fmt.Sprint(j)) + respCmd("GET", key(i, j)) + respCmd("DEL", key(i, j)))
		}
		if _, err := cc.c.Write([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
	}
	for i, cc := range conns {
		_ = cc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for j := range depth {
			v := fmt.Sprint(j)
			for _, want := range []string{"+OK\r\n", fmt.Sprintf("$%d\r\n%s\r\n", len(v), v), ":1\r\n"} {
				if got, err := resp.ReadReply(cc.r); err != nil || string(got) != want {
					t.Fatalf("client %d, command %d: %q, %v; want %q", i, j, got, err, want)
				}
			}
		}
	}
}

// TestLoopAuth: with a password, the loop forwards nothing before AUTH, and everything after.
func TestLoopAuth(t *testing.T) {
	s := startStandalone(t, func(c *conf.Config) { c.Password = "s3cret" })
	c := dialRaw(t, s.addr)
	k := "loop:" + xid.New().String()
	c.expect(t, respCmd("GET", k)+respCmd("AUTH", "wrong")+respCmd("AUTH", "s3cret")+respCmd("SET", k, "v")+respCmd("GET", k)+respCmd("DEL", k),
		"-NOAUTH Authentication required.\r\n",
		"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
		"+OK\r\n", "+OK\r\n", "$1\r\nv\r\n", ":1\r\n")
	// A subscriber is handed over with its session: still logged in after subscriber mode.
	ch := "loop:ch:" + xid.New().String()
	c.expect(t, respCmd("SUBSCRIBE", ch), fmt.Sprintf("*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n", len(ch), ch))
	pub := dialRaw(t, s.addr)
	pub.expect(t, respCmd("AUTH", "s3cret")+respCmd("PUBLISH", ch, "hi"), "+OK\r\n", ":1\r\n")
	c.expect(t, respCmd("UNSUBSCRIBE", ch)+respCmd("GET", k),
		fmt.Sprintf("*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$2\r\nhi\r\n", len(ch), ch),
		fmt.Sprintf("*3\r\n$11\r\nunsubscribe\r\n$%d\r\n%s\r\n:0\r\n", len(ch), ch), "$-1\r\n")
}

// TestHalfClose: a client that shuts its sending side after its commands (as
// `printf ... | nc` does) is answered every command it sent, the router's (AUTH, QUIT) and
// Redis's alike, and then closed; a command it left incomplete is dropped. One that shuts
// while a blocking command waits for it is forgotten at once, as Redis does.
func TestHalfClose(t *testing.T) {
	eachUpstreamWith(t, func(c *conf.Config) { c.Password = "s3cret" }, func(t *testing.T, s *stack) {
		k := "half:" + xid.New().String()
		shut := func(rc *rawClient, raw string) {
			t.Helper()
			if _, err := rc.c.Write([]byte(raw)); err != nil {
				t.Fatal(err)
			}
			if err := rc.c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
		}
		c := dialRaw(t, s.addr)
		shut(c, respCmd("PING")+respCmd("AUTH", "s3cret")+respCmd("SET", k, "v")+respCmd("GET", k)+"PING\r\n"+respCmd("QUIT"))
		c.expectClosed(t, "-NOAUTH Authentication required.\r\n+OK\r\n+OK\r\n$1\r\nv\r\n+PONG\r\n+OK\r\n")

		c = dialRaw(t, s.addr)
		shut(c, respCmd("AUTH", "s3cret")+respCmd("GET", k)+respCmd("DEL", k)+"*2\r\n$3\r\nGET\r\n$5\r\nab")
		c.expectClosed(t, "+OK\r\n$1\r\nv\r\n:1\r\n")

		c = dialRaw(t, s.addr)
		c.expect(t, respCmd("AUTH", "s3cret"), "+OK\r\n")
		shut(c, respCmd("BLPOP", k, "0"))
		c.expectClosed(t, "")
	})
}

// TestLoopBadInput: a protocol error is answered after the replies owed, then the connection
// is closed; so is a client that sends more than the bound without completing a command. The
// loop serves others all along.
func TestLoopBadInput(t *testing.T) {
	s := startStandalone(t, func(c *conf.Config) { c.Limits.MaxArgBytes = 1024 })
	c := dialRaw(t, s.addr)
	c.expect(t, respCmd("PING")+respCmd("GET", "loop:none")+"*2\r\n$3\r\nGET\r\n:1\r\n", "+PONG\r\n", "$-1\r\n")
	c.expectClosed(t, "-ERR Protocol error: expected '$', got ':'\r\n")

	big := dialRaw(t, s.addr)
	head := fmt.Sprintf("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n", 4<<20)
	go func() { _, _ = big.c.Write(append([]byte(head), bytes.Repeat([]byte("x"), 2<<20)...)) }()
	big.expectClosed(t, "-ERR Protocol error: invalid bulk length\r\n")

	many := dialRaw(t, s.addr)
	arg := "$1000\r\n" + strings.Repeat("x", 1000) + "\r\n"
	go func() { _, _ = many.c.Write([]byte("*3000\r\n" + strings.Repeat(arg, 2000))) }()
	many.expectClosed(t, fmt.Sprintf("-ERR request of more than %d bytes without a complete command (limits.max_arg_bytes); closing\r\n", 1024+1<<20))

	ok := dialRaw(t, s.addr)
	if got := ok.do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after the bad clients = %q", got)
	}
}

// TestLoopBigRepliesSlowReader: replies of megabytes, to a client that pipelines many of them
// before it reads any, all arrive whole and in order (the loop stops reading such a client
// until it catches up, and writes as its socket drains).
func TestLoopBigRepliesSlowReader(t *testing.T) {
	s := startStandalone(t, nil)
	c := dialRaw(t, s.addr)
	k := "loop:big:" + xid.New().String()
	value := strings.Repeat("0123456789abcdef", 1<<18) // 4 MiB
	if got := c.do(t, "SET", k, value); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	const n = 16
	go func() {
		var b strings.Builder
		for i := range n {
			b.WriteString(respCmd("GET", k))
			b.WriteString(respCmd("ECHO", fmt.Sprint(i)))
		}
		_, _ = c.c.Write([]byte(b.String()))
	}()
	_ = c.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	want := fmt.Sprintf("$%d\r\n%s\r\n", len(value), value)
	for i := range n {
		got, err := resp.ReadReply(c.r)
		if err != nil || string(got) != want {
			t.Fatalf("GET %d: %d bytes, %v", i, len(got), err)
		}
		if got, err := resp.ReadReply(c.r); err != nil || string(got) != fmt.Sprintf("$%d\r\n%d\r\n", len(fmt.Sprint(i)), i) {
			t.Fatalf("ECHO %d = %q, %v", i, got, err)
		}
	}
	if got := c.do(t, "DEL", k); got != ":1\r\n" {
		t.Fatalf("DEL = %q", got)
	}
}

// ownRedis takes a free port for a redis-server of the test's own, and returns its address and
// a function that starts one there (again after a kill, say); each is gone when the test ends.
func ownRedis(t *testing.T) (addr string, startRedis func() *exec.Cmd) {
	t.Helper()
	return ownRedisUnder(t, nil)
}

// ownRedisUnder is ownRedis with redis-server run by the command wrap returns as it starts
// (datefudge, say); nil runs it as is.
func ownRedisUnder(t *testing.T, wrap func() []string) (addr string, startRedis func() *exec.Cmd) {
	t.Helper()
	testenv.Redis(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	return addr, func() *exec.Cmd {
		var argv []string
		if wrap != nil {
			argv = wrap()
		}
		argv = append(argv, "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		cmd := exec.Command(argv[0], argv[1:]...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		eventually(t, 10*time.Second, "redis-server up", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		createPassthroughUser(t, addr)
		return cmd
	}
}

// TestLoopStalledUpstream: when Redis stops answering, commands in flight get -UNAVAILABLE
// after redis.command_timeout, not never; when it answers again, so does the proxy.
func TestLoopStalledUpstream(t *testing.T) {
	addr, startRedis := ownRedis(t)
	server := startRedis()
	s := startOn(t, addr, func(c *conf.Config) { c.Redis.CommandTimeout = 300 * time.Millisecond })
	c := dialRaw(t, s.addr)
	if got := c.do(t, "SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	if err := server.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if got := c.do(t, "GET", "k"); !strings.HasPrefix(got, "-UNAVAILABLE ") || !strings.Contains(got, "timeout") {
		t.Fatalf("GET with Redis stopped = %q", got)
	}
	if took := time.Since(t0); took < 300*time.Millisecond {
		t.Fatalf("UNAVAILABLE after %v, before the command timeout", took)
	}
	if err := server.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the proxy answers again", func() bool { return c.do(t, "GET", "k") == "$1\r\nv\r\n" })
}

// TestLoopShutdownDrains: a shutdown waits for the commands in flight and answers them; the
// connection is closed afterwards.
func TestLoopShutdownDrains(t *testing.T) {
	addr, startRedis := ownRedis(t)
	server := startRedis()
	// One shared connection, which the GET below opens, when there is no event loop.
	s := startOn(t, addr, func(c *conf.Config) { c.Redis.PassthroughConns = 1 })
	c := dialRaw(t, s.addr)
	if got := c.do(t, "SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	// The SET loaded the command table: this GET goes through the loop (or the one shared
	// connection), which connects (and logs in) to Redis while Redis still answers.
	if got := c.do(t, "GET", "k"); got != "$1\r\nv\r\n" {
		t.Fatalf("GET = %q", got)
	}
	if err := server.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The GET is in flight once the proxy has counted it (each INFO counts itself too).
	admin := dialRaw(t, s.addr)
	processed := func() (n int) {
		info := admin.do(t, "INFO", "seckill")
		i := strings.Index(info, "proxy_total_commands_processed:")
		_, _ = fmt.Sscan(info[i+len("proxy_total_commands_processed:"):], &n)
		return n
	}
	before := processed()
	if _, err := c.c.Write([]byte(respCmd("GET", "k"))); err != nil {
		t.Fatal(err)
	}
	infos := 0
	eventually(t, 5*time.Second, "the GET in flight", func() bool {
		infos++
		return processed() == before+infos+1
	})
	closed := make(chan struct{})
	t.Cleanup(func() { <-closed })
	go func() {
		defer close(closed)
		s.close()
	}()
	// The shutdown has begun: new clients are refused, and it waits for the GET.
	eventually(t, 5*time.Second, "new clients refused", func() bool {
		nc, err := net.Dial("tcp", s.addr)
		if err != nil {
			return true
		}
		defer nc.Close()
		_ = nc.SetReadDeadline(time.Now().Add(time.Second))
		b := make([]byte, 64)
		n, _ := nc.Read(b)
		return n == 0 || strings.HasPrefix(string(b[:n]), "-UNAVAILABLE proxy is shutting down")
	})
	select {
	case <-closed:
		t.Fatal("shutdown did not wait for the command in flight")
	default:
	}
	if err := server.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.expectClosed(t, "$1\r\nv\r\n")
	<-closed
}

// TestLoopMaxClients: past limits.max_clients a new client gets an error and is closed.
func TestLoopMaxClients(t *testing.T) {
	s := startStandalone(t, func(c *conf.Config) { c.Limits.MaxClients = 2 })
	a, b := dialRaw(t, s.addr), dialRaw(t, s.addr)
	for _, c := range []*rawClient{a, b} {
		if got := c.do(t, "PING"); got != "+PONG\r\n" {
			t.Fatalf("PING = %q", got)
		}
	}
	dialRaw(t, s.addr).expectClosed(t, "-ERR max number of clients reached\r\n")
	a.c.Close()
	eventually(t, 5*time.Second, "a client leaves room", func() bool {
		nc, err := net.Dial("tcp", s.addr)
		if err != nil {
			return false
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(time.Second))
		_, _ = nc.Write([]byte(respCmd("PING")))
		got := make([]byte, 7)
		_, err = io.ReadFull(nc, got)
		return err == nil && string(got) == "+PONG\r\n"
	})
}
