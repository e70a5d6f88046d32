package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/sale"
)

// checkLines is SECKILL.CHECK's answer through c as lines: none when it answers OK.
func checkLines(t *testing.T, c *redis.Client, sku string) []string {
	t.Helper()
	v, err := c.Do(context.Background(), "seckill.check", sku).Result()
	if err != nil {
		t.Fatalf("CHECK %s: %v", sku, err)
	}
	if v == "OK" {
		return nil
	}
	lines, ok := v.([]any)
	if !ok {
		t.Fatalf("CHECK %s answered %#v", sku, v)
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = fmt.Sprint(l)
	}
	return out
}

func hasLine(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestDriftRefused: two proxies sell one sale, the second with another Kafka topic that no
// sink of the sale reads (the drift that lost half the orders). The sale records the warming
// proxy's route; the drifted proxy sells nothing (DRIFT naming the topics, counted in INFO
// and /metrics), its CHECK names the difference, its sweeper leaves the sale's outbox alone,
// and every order a buyer was told of reaches MySQL.
func TestDriftRefused(t *testing.T) {
	cfg := newConfig(t, nil)
	drifted := cfg
	drifted.Kafka.Topic, drifted.Kafka.DeadLetterTopic = cfg.Kafka.Topic+".other", cfg.Kafka.Topic+".other.dlq"
	onDataCleanup(t, func() {
		testenv.DeleteTopics(t, drifted.Kafka.Brokers, drifted.Kafka.Topic, drifted.Kafka.DeadLetterTopic)
	})
	b := startProxy(t, drifted, true)
	cb := b.client(t, 1)
	ctx := context.Background()
	sku := newSKU("drift")

	// Orders left in the outbox by a proxy with no tee (one killed after the script): the
	// drifted proxy's sweeper must leave them to the sale's own proxies.
	k := startProxy(t, cfg, false)
	ck := k.client(t, 1)
	k.sale(t, ck, sku, 100)
	for i := range 5 {
		if err := ck.Do(ctx, "seckill.buy", sku, fmt.Sprintf("k%d", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	outbox := sale.KeysFor(sku).Outbox
	eventually(t, 10*time.Second, "the drifted proxy's sweeper leaves the sale alone three times", func() bool {
		return infoField(t, cb, "", "outbox_drifted") >= 3
	})
	if n := b.rc.XLen(ctx, outbox).Val(); n != 5 {
		t.Fatalf("the sale's outbox holds %d entries after the drifted proxy's sweeps, want 5", n)
	}

	a := startProxy(t, cfg, true)
	runSink(t, cfg)
	ca := a.client(t, 1)
	sold := 5
	for i := range 40 {
		c, via := ca, "a"
		if i%2 == 1 {
			c, via = cb, "b"
		}
		err := c.Do(ctx, "seckill.buy", sku, fmt.Sprintf("u%d", i)).Err()
		switch {
		case via == "a" && err == nil:
			sold++
		case via == "b" && code(err) == "DRIFT":
			if !strings.Contains(err.Error(), `topic "`+cfg.Kafka.Topic+`" (this proxy: "`+drifted.Kafka.Topic+`")`) {
				t.Fatalf("the DRIFT error does not name the topics: %v", err)
			}
		default:
			t.Fatalf("buy %d through proxy %s: %v", i, via, err)
		}
	}
	if sold != 25 {
		t.Fatalf("proxy a sold %d, want 20 (and the 5 from the outbox)", sold-5)
	}
	if n := b.g.Stats().Drift; n != 20 {
		t.Fatalf("proxy b counted %d drifted buys, want 20", n)
	}
	if v := value(scrape(t, b.admin), "seckill_proxy_buys_total", map[string]string{"outcome": "drift"}); v != 20 {
		t.Fatalf("proxy b's metric of drifted buys is %v, want 20", v)
	}
	if err := cb.Do(ctx, "seckill.release", sku, "u0").Err(); code(err) != "DRIFT" {
		t.Fatalf("a release through the drifted proxy: %v, want DRIFT", err)
	}
	if lines := checkLines(t, cb, sku); !hasLine(lines, "route: the sale sends its orders to topic="+cfg.Kafka.Topic) {
		t.Fatalf("the drifted proxy's CHECK does not name the route: %q", lines)
	}
	// CHECK is OK with orders still on their way (in flight), so MySQL's count is awaited too.
	var stored int
	eventually(t, 20*time.Second, "every order told of in MySQL, and proxy a's CHECK OK", func() bool {
		if err := a.db.QueryRow(`SELECT COUNT(*) FROM seckill_orders WHERE sku = ? AND status = 'confirmed'`, sku).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		return stored == sold && len(checkLines(t, ca, sku)) == 0
	})
	if late := infoField(t, ca, sku, "late_orders"); late != 0 {
		t.Fatalf("%d late orders", late)
	}
}

// TestLateOrders: orders that left the outbox (Kafka has them) but that no sink stores, as
// with a sink on another topic. CHECK lists each of them once outbox.late_after has passed,
// the sale's metric counts them, and both clear once a sink of the topic runs.
func TestLateOrders(t *testing.T) {
	cfg := newConfig(t, func(c *conf.Config) {
		c.Outbox.SweepAge = 1500 * time.Millisecond
		c.Outbox.LateAfter = 2 * time.Second
	})
	s := startProxy(t, cfg, true)
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("late")
	s.sale(t, c, sku, 10)
	ids := map[string]bool{}
	for i := range 5 {
		id, err := c.Do(ctx, "seckill.buy", sku, fmt.Sprintf("u%d", i)).Text()
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	var lines []string
	eventually(t, 10*time.Second, "CHECK lists the late orders", func() bool {
		lines = checkLines(t, c, sku)
		return hasLine(lines, "late orders: 5 ")
	})
	listed := 0
	for _, l := range lines {
		if id, ok := strings.CutPrefix(l, "late order "); ok {
			id, _, _ = strings.Cut(id, ":")
			if !ids[id] {
				t.Fatalf("CHECK lists a late order %s that was not sold: %q", id, lines)
			}
			listed++
		}
	}
	if listed != 5 {
		t.Fatalf("CHECK lists %d late orders, want 5: %q", listed, lines)
	}
	eventually(t, 10*time.Second, "the sale's late-order metric", func() bool {
		return value(scrape(t, s.admin), "seckill_proxy_sale_late_orders", map[string]string{"sku": sku}) == 5
	})
	runSink(t, cfg)
	eventually(t, 20*time.Second, "CHECK is OK once a sink runs", func() bool { return len(checkLines(t, c, sku)) == 0 })
	eventually(t, 10*time.Second, "the late-order metric clears", func() bool {
		return value(scrape(t, s.admin), "seckill_proxy_sale_late_orders", map[string]string{"sku": sku}) == 0
	})
}
