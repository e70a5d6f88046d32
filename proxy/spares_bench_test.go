package proxy_test

import (
	"bufio"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/rs/xid"

	"seckill-proxy/internal/resp"
	"seckill-proxy/internal/testenv"
)

// BenchmarkGetBesideBlocking: what the spare connections for blocking commands
// (redis.spare_conns) cost a pass-through GET. Two proxies in front of the cluster, one with
// no spares and one with the default two, each with a client running BLPOP with a timeout of
// 10 ms in a loop meanwhile (so that the spares are taken and made again all along, or, with
// none, a connection dialled for each BLPOP). Both proxies run all along, and the rounds
// alternate between them, each first in turn, so that the machine's drift weighs on both
// alike. The GETs come from 8 connections at once; ns/op is the time per GET.
//
//	go test ./proxy -run XXX -bench BenchmarkGetBesideBlocking
func BenchmarkGetBesideBlocking(b *testing.B) {
	type target struct {
		name, addr, key string
	}
	var targets []target
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, spares := range []int{0, 2} {
		cfg := testenv.Config(b)
		cfg.Redis.SpareConns = spares
		addr := fuzzProxy(b, cfg, true)
		key := "bench:spares:" + xid.New().String()
		if got := dialBench(b, addr).do(b, "SET", key, "xyz"); got != "+OK\r\n" {
			b.Fatalf("SET = %q", got)
		}
		targets = append(targets, target{"spares=" + strconv.Itoa(spares), addr, key})
		blpop := dialBench(b, addr)
		wg.Go(func() {
			list := "bench:blpop:" + xid.New().String()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if got := blpop.do(b, "BLPOP", list, "0.01"); got != "*-1\r\n" {
					b.Errorf("BLPOP = %q", got)
					return
				}
			}
		})
	}
	for round := range 4 {
		for i := range targets {
			tg := targets[(i+round)%len(targets)] // each goes first in turn
			b.Run(tg.name, func(b *testing.B) {
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					c := dialBench(b, tg.addr)
					for pb.Next() {
						if got := c.do(b, "GET", tg.key); got != "$3\r\nxyz\r\n" {
							b.Errorf("GET = %q", got)
							return
						}
					}
				})
			})
		}
	}
	close(stop) // before the cleanups close the BLPOP clients' connections
	wg.Wait()
}

// benchConn is a raw client for benchmarks: one command, one reply.
type benchConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialBench(tb testing.TB, addr string) *benchConn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return &benchConn{c: c, r: bufio.NewReader(c)}
}

func (bc *benchConn) do(tb testing.TB, args ...string) string {
	buf := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		buf = append(buf, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	if _, err := bc.c.Write(buf); err != nil {
		tb.Error(err)
		return ""
	}
	reply, err := resp.ReadReply(bc.r)
	if err != nil {
		tb.Error(err)
		return ""
	}
	return string(reply)
}
