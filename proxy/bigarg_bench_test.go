package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill-proxy/conf"
	"seckill-proxy/internal/testenv"
)

// BenchmarkLargeArgument: a SET of 8, 16, 32 and 64 MiB, a GET of it back, and an unknown
// command whose name is that long, straight to the dev stack's redis-server, through the
// proxy in front of it (the event loop) and through the proxy in front of the cluster, one
// after the other in one run. Meanwhile another client PINGs the same server in a loop:
// other-max-ms is the longest it waited for a PONG. What redis-server takes, and makes others
// wait, is the floor: the proxy must stay of the same order (it was quadratic once: 4.6 s for
// a SET of 32 MiB, 36 s for a GET of 100 MiB).
//
//	go test ./proxy -run XXX -bench BenchmarkLargeArgument -benchtime 5x
func BenchmarkLargeArgument(b *testing.B) {
	addr := testenv.Standalone(b)
	standalone := testenv.Config(b)
	standalone.Redis.Mode, standalone.Redis.Addrs = conf.ModeStandalone, []string{addr}
	standalone.Limits.MaxArgBytes = 512 << 20
	cluster := testenv.Config(b)
	cluster.Limits.MaxArgBytes = 512 << 20
	targets := []struct{ name, addr string }{
		{"redis", addr}, {"proxy", fuzzProxy(b, standalone, true)}, {"proxy-cluster", fuzzProxy(b, cluster, true)},
	}
	for _, mib := range []int{8, 16, 32, 64} {
		value := strings.Repeat("x", mib<<20)
		key := fmt.Sprintf("bench:bigarg:%d", mib)
		ops := []struct {
			name string
			req  []byte
			want string // the reply's first line
			skip int    // what follows it
		}{
			{"SET", []byte(fmt.Sprintf("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(value), value)), "+OK\r\n", 0},
			{"GET", []byte(fmt.Sprintf("*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key)), fmt.Sprintf("$%d\r\n", len(value)), len(value) + 2},
			{"NAME", []byte(fmt.Sprintf("*1\r\n$%d\r\n%s\r\n", len(value), value)), "-ERR unknown command", 0},
		}
		for _, tg := range targets {
			c, err := net.Dial("tcp", tg.addr)
			if err != nil {
				b.Fatal(err)
			}
			r := bufio.NewReaderSize(c, 64<<10)
			for _, op := range ops {
				b.Run(fmt.Sprintf("%s/%dMiB/%s", op.name, mib, tg.name), func(b *testing.B) {
					other := pinger(b, tg.addr)
					b.SetBytes(int64(len(value)))
					for b.Loop() {
						if _, err := c.Write(op.req); err != nil {
							b.Fatal(err)
						}
						if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, strings.TrimSuffix(op.want, "\r\n")) {
							b.Fatalf("%s: %.80q, %v", op.name, line, err)
						}
						if _, err := r.Discard(op.skip); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(other().Microseconds())/1000, "other-max-ms")
				})
			}
			c.Close()
		}
	}
}

// pinger PINGs addr on a connection of its own until the returned function is called, which
// stops it and says the longest a PING waited for its PONG.
func pinger(b *testing.B, addr string) func() time.Duration {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	var worst atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		r := bufio.NewReader(c)
		for !stop.Load() {
			start := time.Now()
			if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
				return
			}
			if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
				return
			}
			if d := int64(time.Since(start)); d > worst.Load() {
				worst.Store(d)
			}
			time.Sleep(time.Millisecond)
		}
	})
	return func() time.Duration {
		stop.Store(true)
		wg.Wait()
		c.Close()
		return time.Duration(worst.Load())
	}
}
