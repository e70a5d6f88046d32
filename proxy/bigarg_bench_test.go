package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"

	"seckill-proxy/conf"
	"seckill-proxy/internal/testenv"
)

// BenchmarkLargeArgument: a SET of 8, 16, 32 and 64 MiB, and a GET of it back, straight to
// the dev stack's redis-server and through the proxy in front of it (the event loop), one
// after the other in one run. What redis-server takes is the floor: the proxy must stay of
// the same order (it was quadratic: 4.6 s for a SET of 32 MiB, 36 s for a GET of 100 MiB).
//
//	go test ./proxy -run XXX -bench BenchmarkLargeArgument -benchtime 5x
func BenchmarkLargeArgument(b *testing.B) {
	addr := testenv.Standalone(b)
	cfg := testenv.Config(b)
	cfg.Redis.Mode, cfg.Redis.Addrs = conf.ModeStandalone, []string{addr}
	cfg.Limits.MaxArgBytes = 512 << 20
	targets := []struct{ name, addr string }{{"redis", addr}, {"proxy", fuzzProxy(b, cfg, true)}}
	for _, mib := range []int{8, 16, 32, 64} {
		value := strings.Repeat("x", mib<<20)
		key := fmt.Sprintf("bench:bigarg:%d", mib)
		set := []byte(fmt.Sprintf("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(value), value))
		get := []byte(fmt.Sprintf("*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key))
		for _, tg := range targets {
			c, err := net.Dial("tcp", tg.addr)
			if err != nil {
				b.Fatal(err)
			}
			r := bufio.NewReaderSize(c, 64<<10)
			b.Run(fmt.Sprintf("SET/%dMiB/%s", mib, tg.name), func(b *testing.B) {
				b.SetBytes(int64(len(value)))
				for b.Loop() {
					if _, err := c.Write(set); err != nil {
						b.Fatal(err)
					}
					if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
						b.Fatalf("SET: %q, %v", line, err)
					}
				}
			})
			b.Run(fmt.Sprintf("GET/%dMiB/%s", mib, tg.name), func(b *testing.B) {
				b.SetBytes(int64(len(value)))
				want := fmt.Sprintf("$%d\r\n", len(value))
				for b.Loop() {
					if _, err := c.Write(get); err != nil {
						b.Fatal(err)
					}
					if line, err := r.ReadString('\n'); err != nil || line != want {
						b.Fatalf("GET: %q, %v", line, err)
					}
					if _, err := r.Discard(len(value) + 2); err != nil {
						b.Fatal(err)
					}
				}
			})
			c.Close()
		}
	}
}
