package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/sale"
)

// sweepingPair starts two proxies that sweep every 100 ms entries older than 300 ms: s, which
// sweeps, and quiet, which sells with no tee and leaves its orders in the outbox.
func sweepingPair(t *testing.T) (s, quiet *stack) {
	t.Helper()
	cfg := newConfig(t, func(c *conf.Config) {
		c.Buy.CallTimeout, c.Outbox.SweepAge, c.Outbox.SweepInterval, c.Outbox.LeaseTTL = 200*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	})
	return startProxy(t, cfg, true), startProxy(t, cfg, false)
}

// TestSweeper: an outbox entry no one can read (written past the proxy, on Redis directly) is
// moved to the dead letters once and shown by CHECK; one broken sale in the set does not stop
// the others' outboxes from being swept; a sale leaves the set once it is over and drained,
// and a release puts it back.
func TestSweeper(t *testing.T) {
	s, quiet := sweepingPair(t)
	c, qc := s.client(t, 1), quiet.client(t, 1)
	ctx := context.Background()

	broken := newSKU("broken")
	bk := sale.KeysFor(broken)
	s.rc.Set(ctx, bk.Outbox, "not a stream", 0)
	s.rc.SAdd(ctx, sale.SalesKey, broken)
	t.Cleanup(func() {
		s.rc.Del(context.Background(), bk.Outbox)
		s.rc.SRem(context.Background(), sale.SalesKey, broken)
	})

	sku := newSKU("sweep")
	k := sale.KeysFor(sku)
	s.sale(t, c, sku, 5)
	t.Cleanup(func() { s.rc.Del(context.Background(), k.Dead) })
	if err := qc.Do(ctx, "seckill.buy", sku, "u1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.rc.XAdd(ctx, &redis.XAddArgs{Stream: k.Outbox, Values: []any{"order", "forged", "uid", "u9", "qty", "seven"}}).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the outbox swept, past the broken sale", func() bool {
		return s.rc.XLen(ctx, k.Outbox).Val() == 0
	})
	if n := s.rc.XLen(ctx, k.Dead).Val(); n != 1 {
		t.Fatalf("%d dead letters, want 1", n)
	}
	dead := s.rc.XRange(ctx, k.Dead, "-", "+").Val()[0].Values
	if dead["order"] != "forged" || !strings.Contains(dead["error"].(string), `qty "seven" is not a number`) {
		t.Fatalf("dead letter %v", dead)
	}
	lines, err := c.Do(ctx, "seckill.check", sku).StringSlice()
	if err != nil || !strings.Contains(strings.Join(lines, "\n"), "dead letters: 1 unreadable outbox entries moved to "+k.Dead) {
		t.Fatalf("CHECK = %q, %v", lines, err)
	}

	member := func() bool { return s.rc.SIsMember(ctx, sale.SalesKey, sku).Val() }
	if !member() {
		t.Fatal("an open sale left the set of sales")
	}
	if err := c.Do(ctx, "seckill.close", sku).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the closed, drained sale leaves the set", func() bool { return !member() })
	if err := c.Do(ctx, "seckill.release", sku, "u1").Err(); err != nil {
		t.Fatal(err)
	}
	if !member() {
		t.Fatal("a release did not put its sale back in the set of sales")
	}
}

// TestWarmKeepsTheSaleSwept: a sweeper that passes while a WARM is half way (the sale in the
// set, its meta not written yet) finds it "gone" and takes it out of the set; the WARM must
// leave the open sale in the set all the same, or an order a killed proxy left in its outbox
// is never swept (seen in the fault suite's proxy-kill: 10 orders never reached MySQL). Many
// WARMs beside a sweeper that passes every millisecond.
func TestWarmKeepsTheSaleSwept(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Outbox.SweepInterval = time.Millisecond })
	c := s.client(t, 1)
	ctx := context.Background()
	for i := range 100 {
		sku := newSKU("warmswept")
		s.sale(t, c, sku, 1)
		if ok, err := s.rc.SIsMember(ctx, sale.SalesKey, sku).Result(); err != nil || !ok {
			t.Fatalf("WARM %d: the open sale %s is not in %s (%v)", i, sku, sale.SalesKey, err)
		}
	}
}
