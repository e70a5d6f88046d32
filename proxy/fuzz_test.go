package proxy_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/app"
	"seckill-proxy/conf"
	"seckill-proxy/internal/resp"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/proxy"
	"seckill-proxy/router"
)

// FuzzRequestPath sends arbitrary bytes to a proxy (no services behind it): malformed RESP,
// huge bulk lengths, deep arrays. The proxy must neither crash nor hang: after each input a
// fresh client still gets PONG, and a client that sent a protocol error gets an error.
func FuzzRequestPath(f *testing.F) {
	for _, seed := range []string{
		"*1\r\n$4\r\nPING\r\n",
		"*1\r\n$999999999999\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n",
		"*1\r\n*1\r\n*1\r\n$4\r\nPING\r\n",
		"*-5\r\n", "$5\r\nhello\r\n", "PING\r\n", "\r\n\r\n", "*2\r\n$4\r\nECHO\r\n$-1\r\n",
		"*2\r\n$11\r\nSECKILL.BUY\r\n$1\r\nx\r\n", strings.Repeat("*1\r\n", 1000),
	} {
		f.Add([]byte(seed))
	}
	cfg := conf.Default()
	cfg.Redis.Addrs = []string{"127.0.0.1:1"} // nothing listens: buys fail fast, nothing hangs
	addr := fuzzProxy(f, cfg, false)
	f.Fuzz(func(t *testing.T, in []byte) { sendAndProbe(t, addr, in, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n") })
}

// sendAndProbe sends in on a connection of its own, then checks that a new client still gets
// the replies want to probe.
func sendAndProbe(t *testing.T, addr string, in []byte, probe string, want ...string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write(in)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	reply, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if strings.HasPrefix(reply, "-ERR Protocol error") && !strings.HasSuffix(reply, "\r\n") {
		t.Fatalf("malformed error reply %q", reply)
	}
	p, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("the proxy stopped accepting after %q: %v", in, err)
	}
	defer p.Close()
	_ = p.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := p.Write([]byte(probe)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(p)
	for i, w := range want {
		if got, err := resp.ReadReply(br); err != nil || string(got) != w {
			t.Fatalf("after %q, probe reply %d = %q, %v; want %q", in, i, got, err, w)
		}
	}
}

// TestRequestTooLarge: a client that sends more than the bound without completing a command
// gets an error and is disconnected; the proxy does not buffer on without end.
func TestRequestTooLarge(t *testing.T) {
	limits := conf.Default().Limits
	limits.MaxArgBytes = 1024
	r := router.New(nil, zap.NewNop(), router.Options{MaxArgBytes: limits.MaxArgBytes})
	srv := proxy.New(r, nil, zap.NewNop(), limits)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown(context.Background())
	// A bulk length above limits.max_arg_bytes is refused when its header arrives, as Redis
	// refuses one above proto-max-bulk-len; many arguments each under it, together past it plus
	// 1 MiB, when that much has come without a complete command.
	for _, tt := range []struct{ head, want string }{
		{"*2\r\n$4\r\nECHO\r\n$100000000\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*5000\r\n", "-ERR request of more than 1049600 bytes"},
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			_, _ = c.Write([]byte(tt.head))
			arg := []byte("$1000\r\n" + strings.Repeat("x", 1000) + "\r\n")
			for range 4000 { // 4 MiB
				if _, err := c.Write(arg); err != nil {
					return
				}
			}
		}()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, strings.TrimSuffix(tt.want, "\r\n")) {
			t.Fatalf("%q: reply %q, %v; want %q", tt.head, line, err, tt.want)
		}
		if _, err := br.ReadString('\n'); err == nil {
			t.Fatal("the connection stayed open")
		}
	}
	// A normal argument just under the bound still works on a new connection.
	c2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	arg := strings.Repeat("x", 1000)
	_, _ = c2.Write([]byte("*2\r\n$4\r\nECHO\r\n$1000\r\n" + arg + "\r\n"))
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := bufio.NewReader(c2).ReadString('\n'); err != nil || got != "$1000\r\n" {
		t.Fatalf("ECHO of 1000 bytes: %q, %v", got, err)
	}
}

// eventLoopSeeds are FuzzEventLoop's and FuzzEventLoopCluster's seeds.
var eventLoopSeeds = []string{
	"*2\r\n$3\r\nGET\r\n$4\r\nfz:a\r\n",
	"*3\r\n$3\r\nSET\r\n$4\r\nfz:a\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$4\r\nfz:a\r\n*1\r\n$4\r\nPING\r\n",
	"GET fz:a\r\nSET fz:b \"x y\"\r\n", "*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$4\r\nfz:n\r\n*1\r\n$4\r\nEXEC\r\n",
	"*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nfz:c\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\n",
	"*3\r\n$5\r\nBLPOP\r\n$4\r\nfz:l\r\n$4\r\n0.01\r\n", "*2\r\n$3\r\nGET\r\n:1\r\n", "*1\r\n$999999999999\r\n",
	"*2\r\n$3\r\nDEL\r\n$12\r\nseckill:sale\r\n", "*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n", "*0\r\n\r\n*-1\r\n",
	strings.Repeat("*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n", 300) + "*1\r\n",
	"*3\r\n$4\r\nMGET\r\n$4\r\nfz:a\r\n$4\r\nfz:b\r\n*2\r\n$6\r\nDBSIZE\r\n$1\r\nx\r\n",
}

// FuzzEventLoop is FuzzRequestPath for the event loop in front of a standalone server, where
// what parses as a command may well reach Redis: whatever the bytes, the loop neither crashes
// nor stalls, and a fresh client still gets its replies through it.
func FuzzEventLoop(f *testing.F) {
	fuzzEventLoop(f, func(c *conf.Config) {
		c.Redis.Mode, c.Redis.Addrs = conf.ModeStandalone, []string{testenv.Standalone(f)}
	})
}

// FuzzEventLoopCluster is FuzzEventLoop in front of the dev stack's cluster: commands go to
// several masters at once.
func FuzzEventLoopCluster(f *testing.F) {
	fuzzEventLoop(f, func(c *conf.Config) { c.Redis.Addrs = testenv.Redis(f) })
}

func fuzzEventLoop(f *testing.F, upstreamOf func(*conf.Config)) {
	for _, seed := range eventLoopSeeds {
		f.Add([]byte(seed))
	}
	cfg := conf.Default()
	upstreamOf(&cfg)
	cfg.Limits.MaxArgBytes = 64 << 10
	addr := fuzzProxy(f, cfg, true)
	// ECHO is the router's own; GETs of keys nobody writes (two slots) go through the loop.
	probe := "*2\r\n$4\r\nECHO\r\n$2\r\nok\r\n*2\r\n$3\r\nGET\r\n$11\r\nfz:nobody:x\r\n*2\r\n$3\r\nGET\r\n$11\r\nfz:nobody:y\r\n"
	f.Fuzz(func(t *testing.T, in []byte) { sendAndProbe(t, addr, in, probe, "$2\r\nok\r\n", "$-1\r\n", "$-1\r\n") })
}

// fuzzProxy starts a proxy on cfg (no database, no Kafka), assembled as the binary assembles
// it, for a fuzz target or a benchmark, and returns its address. passThrough waits until the
// pass-through user is verified.
func fuzzProxy(tb testing.TB, cfg conf.Config, passThrough bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p, err := app.Start(cfg, app.Options{Instance: "fuzz", NoTee: true, Listener: ln, ACLRetry: 100 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Shutdown(context.Background(), time.Second) })
	if passThrough {
		select {
		case <-p.Verified():
		case err := <-p.Unfit():
			tb.Fatal(err)
		}
	}
	return p.Addr
}
