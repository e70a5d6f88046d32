package proxy_test

import (
	"strings"
	"testing"

	"seckill-proxy/conf"
)

// TestOneLookupPerCommand: each command a client sends is looked up in the router's table
// once (router.Identify, counted in INFO seckill's proxy_command_lookups), however it is
// served: a buy, a GET straight to its node, a BLPOP, a MULTI; in both server modes (the
// event loops and a goroutine per client), in front of the cluster and a standalone server.
func TestOneLookupPerCommand(t *testing.T) {
	for _, loops := range []int{1, 0} {
		for _, standalone := range []bool{false, true} {
			name := map[bool]string{false: "cluster", true: "standalone"}[standalone] + map[int]string{1: "/event-loops", 0: "/goroutines"}[loops]
			t.Run(name, func(t *testing.T) {
				mutate := func(c *conf.Config) { c.Redis.EventLoops = loops }
				s := map[bool]func() *stack{
					false: func() *stack { return start(t, mutate) },
					true:  func() *stack { return startStandalone(t, mutate) },
				}[standalone]()
				sku := newSKU("lookup")
				s.sale(t, s.client(t, 1), sku, 5)
				c := dialRaw(t, s.addr)
				for _, tc := range []struct {
					cmd  []string
					want string
				}{
					{[]string{"SECKILL.BUY", sku, "u1"}, "$"},
					{[]string{"GET", "lookup:" + sku}, "$-1"},
					{[]string{"BLPOP", "lookup:l:" + sku, "0.01"}, "*-1"},
					{[]string{"MULTI"}, "+OK"},
					{[]string{"EXEC"}, "*0"},
					{[]string{"PING"}, "+PONG"},
				} {
					before := s.field("proxy_command_lookups")
					if got := c.do(t, tc.cmd...); !strings.HasPrefix(got, tc.want) {
						t.Fatalf("%v = %q, want %s...", tc.cmd, got, tc.want)
					}
					if n := s.field("proxy_command_lookups") - before; n != 1 {
						t.Errorf("%v: looked up %d times, want once", tc.cmd, n)
					}
				}
			})
		}
	}
}
