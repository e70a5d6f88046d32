package proxy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
)

// TestEventsReachEveryProxy: with 16 proxies on the cluster, a sellout, a RELEASE, a CLOSE and a
// re-WARM done through one of them reach every other one's flags within a second (the events
// are hints, each checked against Redis by each proxy); and a change no event told (a
// release written straight to Redis) is undone everywhere once the flags lapse
// (buy.sold_out_reprobe, 2 s), within the 30 s the background budget allows for a lost event.
func TestEventsReachEveryProxy(t *testing.T) {
	const proxies = 16
	s := start(t, nil)
	all := []*guard.Guard{s.g}
	for range proxies - 1 {
		all = append(all, startProxy(t, newConfig(t, nil), false).g)
	}
	c := s.client(t, 2)
	ctx := context.Background()
	sku := newSKU("reach")
	s.sale(t, c, sku, 1)

	// reach waits until every proxy's flags for sku say want (flagged, closed), and returns how
	// long the slowest took from since.
	reach := func(what string, since time.Time, limit time.Duration, flagged, closed bool) time.Duration {
		t.Helper()
		left := map[int]bool{}
		for i := range all {
			left[i] = true
		}
		for len(left) > 0 {
			now := time.Now()
			for i := range left {
				if f, cl, _ := all[i].Flags().Get(sku, now); f == flagged && (cl != "") == closed {
					delete(left, i)
				}
			}
			if elapsed := time.Since(since); len(left) > 0 && elapsed > limit {
				t.Fatalf("%s: %d of %d proxies still not flagged %v closed %v after %v", what, len(left), proxies, flagged, closed, elapsed)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(since)
	}
	took := map[string]time.Duration{}

	at := time.Now()
	if err := c.Do(ctx, "seckill.buy", sku, "u1").Err(); err != nil {
		t.Fatalf("the one unit: %v", err)
	}
	took["sellout"] = reach("sellout", at, time.Second, true, false)

	at = time.Now()
	if err := c.Do(ctx, "seckill.release", sku, "u1").Err(); err != nil {
		t.Fatalf("RELEASE: %v", err)
	}
	took["release"] = reach("release", at, time.Second, false, false)

	at = time.Now()
	if err := c.Do(ctx, "seckill.close", sku).Err(); err != nil {
		t.Fatalf("CLOSE: %v", err)
	}
	took["close"] = reach("close", at, time.Second, true, true)

	at = time.Now()
	if err := c.Do(ctx, "seckill.warm", sku, "FORCE").Err(); err != nil {
		t.Fatalf("re-WARM: %v", err)
	}
	took["warm"] = reach("warm", at, time.Second, false, false)

	// A lost event: sold out again, then a unit comes back with no event. Each proxy's flag
	// lapses at its re-probe, and its next buy asks Redis.
	if err := c.Do(ctx, "seckill.buy", sku, "u2").Err(); err != nil {
		t.Fatalf("the unit after the re-warm: %v", err)
	}
	reach("sellout again", time.Now(), time.Second, true, false)
	at = time.Now()
	if err := s.rc.Incr(ctx, "seckill:{"+sku+"}:stock").Err(); err != nil {
		t.Fatal(err)
	}
	took["lost release"] = reach("lost release", at, 30*time.Second, false, false)
	if lapse := conf.Default().Buy.SoldOutReprobe; took["lost release"] > lapse+time.Second {
		t.Errorf("a lost release took %v to undo, past the re-probe of %v", took["lost release"], lapse)
	}
	t.Log(fmt.Sprint("slowest of ", proxies, " proxies: ", took))
}
