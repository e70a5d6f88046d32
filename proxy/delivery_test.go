package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
	"seckill-proxy/sale"
	"seckill-proxy/sink"
)

// buyAll buys once for each of n buyers named prefix+i over conns connections, and returns
// the order ids handed out and the count of each reply code.
func buyAll(t *testing.T, c *redis.Client, sku, prefix string, n, conns int) ([]string, map[string]int) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var ids []string
	replies := map[string]int{}
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			var got []string
			local := map[string]int{}
			for i := w; i < n; i += conns {
				id, err := c.Do(ctx, "seckill.buy", sku, prefix+strconv.Itoa(i)).Text()
				if err == nil {
					got = append(got, id)
				}
				local[code(err)]++
			}
			mu.Lock()
			defer mu.Unlock()
			ids = append(ids, got...)
			for k, v := range local {
				replies[k] += v
			}
		})
	}
	wg.Wait()
	return ids, replies
}

// mysqlOrders counts a SKU's orders by status, and returns its stock.
func (s *stack) mysqlOrders(t *testing.T, sku string) (map[string]int, int64) {
	t.Helper()
	rows, err := s.db.Query(`SELECT status, COUNT(*) FROM seckill_orders WHERE sku = ? GROUP BY status`, sku)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		out[st] = n
	}
	var stock int64
	if err := s.db.QueryRow(`SELECT stock FROM seckill_stock WHERE sku = ?`, sku).Scan(&stock); err != nil {
		t.Fatal(err)
	}
	return out, stock
}

// waitConfirmed waits until MySQL holds n confirmed orders of sku.
func (s *stack) waitConfirmed(t *testing.T, sku string, n int, limit time.Duration) {
	t.Helper()
	eventually(t, limit, fmt.Sprintf("%d confirmed orders in MySQL", n), func() bool {
		st, _ := s.mysqlOrders(t, sku)
		return st[sink.StatusConfirmed] == n
	})
}

// waitOutboxEmpty waits until sku's outbox holds nothing.
func (s *stack) waitOutboxEmpty(t *testing.T, sku string, limit time.Duration) {
	t.Helper()
	eventually(t, limit, "outbox drained", func() bool {
		return s.rc.XLen(context.Background(), sale.KeysFor(sku).Outbox).Val() == 0
	})
}

// waitCheckOK waits until SECKILL.CHECK through c answers OK.
func waitCheckOK(t *testing.T, c *redis.Client, sku string, limit time.Duration) {
	t.Helper()
	eventually(t, limit, "CHECK OK", func() bool {
		ok, _ := c.Do(context.Background(), "seckill.check", sku).Text()
		return ok == "OK"
	})
}

// checkOrdersInMySQL asserts that every id handed out is one row in MySQL.
func (s *stack) checkOrdersInMySQL(t *testing.T, sku string, ids []string) {
	t.Helper()
	stored := map[string]bool{}
	rows, err := s.db.Query(`SELECT order_id FROM seckill_orders WHERE sku = ?`, sku)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored[id] = true
	}
	for _, id := range ids {
		if !stored[id] {
			t.Fatalf("order %s was handed to a buyer but is not in MySQL", id)
		}
	}
}

// TestEndToEnd: the seeds' sale through proxy, Kafka and sink. Once drained, MySQL holds
// exactly the 2,000 orders handed out, stock 0 in both stores, and empty outboxes.
func TestEndToEnd(t *testing.T) {
	const units, buyers, conns = 2000, 80000, 200
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	snk := runSink(t, cfg)
	c := s.client(t, conns)
	sku := newSKU("e2e")
	s.sale(t, c, sku, units)

	ids, replies := buyAll(t, c, sku, "u", buyers, conns)
	lastBuy := time.Now()
	if replies[""] != units || replies["SOLDOUT"] != buyers-units {
		t.Fatalf("replies %v", replies)
	}
	s.waitConfirmed(t, sku, units, 60*time.Second)
	t.Logf("the sale was entirely in MySQL %v after the last buy; sink %+v", time.Since(lastBuy).Round(time.Millisecond), snk.Stats())
	st, stock := s.mysqlOrders(t, sku)
	if len(st) != 1 || stock != 0 {
		t.Fatalf("MySQL orders %v, stock %d; want only %d confirmed and stock 0", st, stock, units)
	}
	s.checkOrdersInMySQL(t, sku, ids)
	ctx := context.Background()
	k := sale.KeysFor(sku)
	if left, _ := s.rc.Get(ctx, k.Stock).Int64(); left != stock {
		t.Fatalf("Redis stock %d != MySQL stock %d", left, stock)
	}
	s.waitOutboxEmpty(t, sku, 10*time.Second)
}

// TestStatusShowsTheOutcome: STATUS answers confirmed and rejected from the sink's outcomes.
func TestStatusShowsTheOutcome(t *testing.T) {
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, 1)
	sku := newSKU("status")
	s.sale(t, c, sku, 5)
	ctx := context.Background()
	// MySQL has less than Redis (as after a hand-made SET): the second order is rejected.
	if _, err := s.db.Exec(`UPDATE seckill_items SET stock = 1 WHERE sku = ?`, sku); err != nil {
		t.Fatal(err)
	}
	id1, err := c.Do(ctx, "seckill.buy", sku, "first").Text()
	if err != nil {
		t.Fatal(err)
	}
	id2, err := c.Do(ctx, "seckill.buy", sku, "second").Text()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "outcomes in Redis", func() bool {
		a, _ := c.Do(ctx, "seckill.status", sku, "first").Text()
		b, _ := c.Do(ctx, "seckill.status", sku, "second").Text()
		return a == "confirmed "+id1 && b == "rejected "+id2+" sold out"
	})
}

// TestKafkaDownMidSale: with replies after the Lua call, sales go on while Kafka is down and
// the outbox holds the orders; once Kafka is back, every order reaches MySQL exactly once.
func TestKafkaDownMidSale(t *testing.T) {
	needDevstack(t)
	t.Cleanup(func() {
		if err := devstack(t, "up"); err != nil {
			t.Errorf("could not restart Kafka: %v", err)
		}
	})
	cfg := newConfig(t, func(c *conf.Config) {
		c.Outbox.SweepAge, c.Outbox.SweepInterval = 2*time.Second, 500*time.Millisecond
	})
	s := startProxy(t, cfg, true)
	snk := runSink(t, cfg)
	c := s.client(t, 20)
	sku := newSKU("kafkadown")
	s.sale(t, c, sku, 300)
	ctx := context.Background()

	before, _ := buyAll(t, c, sku, "a", 100, 10)
	s.waitConfirmed(t, sku, 100, 30*time.Second)
	if err := devstack(t, "stop", "kafka"); err != nil {
		t.Fatal(err)
	}
	during, replies := buyAll(t, c, sku, "b", 200, 10)
	if replies[""] != 200 {
		t.Fatalf("with Kafka down and replies after Lua, sales must go on: %v", replies)
	}
	k := sale.KeysFor(sku)
	if n := s.rc.XLen(ctx, k.Outbox).Val(); n < 200 {
		t.Fatalf("outbox holds %d orders with Kafka down, want at least 200", n)
	}
	if err := devstack(t, "up"); err != nil {
		t.Fatal(err)
	}
	s.waitConfirmed(t, sku, 300, 90*time.Second)
	s.waitOutboxEmpty(t, sku, 30*time.Second)
	st, stock := s.mysqlOrders(t, sku)
	if len(st) != 1 || stock != 0 {
		t.Fatalf("orders %v stock %d, want 300 confirmed and nothing else", st, stock)
	}
	s.checkOrdersInMySQL(t, sku, append(before, during...))
	t.Logf("sink %+v, tee %+v", snk.Stats(), s.tee.Stats())
}

// TestReplyAfterKafkaFailsFastWhenKafkaIsDown: with replies after Kafka's acknowledgement, a
// buy fails with UNAVAILABLE while Kafka is down, and nothing is sold.
func TestReplyAfterKafkaFailsFastWhenKafkaIsDown(t *testing.T) {
	cfg := newConfig(t, func(c *conf.Config) {
		c.Buy.ReplyAfter = conf.ReplyAfterKafka
		c.Kafka.Brokers = []string{"127.0.0.1:1"}
	})
	s := startProxy(t, cfg, true)
	c := s.client(t, 1)
	sku := newSKU("afterkafka")
	s.sale(t, c, sku, 5)
	ctx := context.Background()
	err := c.Do(ctx, "seckill.buy", sku, "u1").Err()
	if code(err) != "UNAVAILABLE" {
		t.Fatalf("buy with Kafka down: %v, want UNAVAILABLE", err)
	}
	if left, _ := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Int(); left != 5 {
		t.Fatalf("stock %d, want 5: nothing may be sold", left)
	}
}

// TestReplyAfterKafka: with Kafka up, the buyer's reply comes after Kafka has the order.
func TestReplyAfterKafka(t *testing.T) {
	cfg := newConfig(t, func(c *conf.Config) { c.Buy.ReplyAfter = conf.ReplyAfterKafka })
	s := startProxy(t, cfg, true)
	c := s.client(t, 4)
	sku := newSKU("afterkafka")
	s.sale(t, c, sku, 20)
	eventually(t, 30*time.Second, "the tee connects", s.tee.Healthy)
	_, replies := buyAll(t, c, sku, "u", 20, 4)
	if replies[""] != 20 {
		t.Fatalf("replies %v", replies)
	}
	if acked := s.tee.Stats().Acked; acked < 20 {
		t.Fatalf("%d acknowledged by Kafka when 20 buyers had their replies", acked)
	}
}

// TestProxyKilledBeforePublish: a proxy that sold orders but never published them (killed
// between the script and Kafka) leaves them in the outbox; another proxy's sweeper publishes
// them, and the sink stores each once.
func TestProxyKilledBeforePublish(t *testing.T) {
	cfg := newConfig(t, func(c *conf.Config) {
		c.Buy.CallTimeout = 300 * time.Millisecond
		c.Outbox.SweepAge, c.Outbox.SweepInterval = 500*time.Millisecond, 200*time.Millisecond
	})
	dead := startProxy(t, cfg, false)
	c := dead.client(t, 4)
	sku := newSKU("killed")
	dead.sale(t, c, sku, 50)
	ids, replies := buyAll(t, c, sku, "u", 30, 4)
	if replies[""] != 30 {
		t.Fatalf("replies %v", replies)
	}
	dead.close()

	other := startProxy(t, cfg, true)
	runSink(t, cfg)
	other.waitConfirmed(t, sku, 30, 60*time.Second)
	other.checkOrdersInMySQL(t, sku, ids)
	if _, stock := other.mysqlOrders(t, sku); stock != 20 {
		t.Fatalf("MySQL stock %d, want 20", stock)
	}
	other.waitOutboxEmpty(t, sku, 10*time.Second)
}

// TestRedeliveryChangesNothing replays the topic from offset 0 through a new group.
func TestRedeliveryChangesNothing(t *testing.T) {
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, 8)
	sku := newSKU("replay")
	s.sale(t, c, sku, 100)
	buyAll(t, c, sku, "u", 150, 8)
	s.waitConfirmed(t, sku, 100, 30*time.Second)
	before, stockBefore := s.mysqlOrders(t, sku)

	replay := cfg
	replay.Kafka.Group = cfg.Kafka.Group + "-replay"
	again := runSink(t, replay)
	eventually(t, 60*time.Second, "the replay read every order", func() bool { return again.Stats().Redelivered >= 100 })
	after, stockAfter := s.mysqlOrders(t, sku)
	if len(after) != len(before) || after[sink.StatusConfirmed] != before[sink.StatusConfirmed] || stockAfter != stockBefore {
		t.Fatalf("replay changed MySQL: %v stock %d -> %v stock %d", before, stockBefore, after, stockAfter)
	}
	if st := again.Stats(); st.Confirmed != 0 || st.Rejected != 0 {
		t.Fatalf("replay stored new orders: %+v", st)
	}
}

// TestOversellGuard: the seeds' 2,053-for-2,000 story. Mid-sale, an operator sets the stock
// on Redis directly to 2,053 less what was sold. The sink rejects exactly the excess, MySQL
// stock never goes below 0, and CHECK reports the difference with every rejected order.
func TestOversellGuard(t *testing.T) {
	const units, excess, early = 2000, 53, 500
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, 50)
	ctx := context.Background()
	sku := newSKU("oversell")
	s.sale(t, c, sku, units)
	_, first := buyAll(t, c, sku, "early", early, 50)
	if first[""] != early {
		t.Fatalf("replies %v, want %d orders", first, early)
	}
	if err := s.rc.Set(ctx, sale.KeysFor(sku).Stock, units+excess-early, 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, replies := buyAll(t, c, sku, "u", 3000, 50)
	if replies[""] != units+excess-early {
		t.Fatalf("replies %v, want %d successes from Redis", replies, units+excess-early)
	}
	eventually(t, 60*time.Second, "every order stored", func() bool {
		st, _ := s.mysqlOrders(t, sku)
		return st[sink.StatusConfirmed]+st[sink.StatusRejected] == units+excess
	})
	st, stock := s.mysqlOrders(t, sku)
	if st[sink.StatusConfirmed] != units || st[sink.StatusRejected] != excess || stock != 0 {
		t.Fatalf("MySQL: %v stock %d; want %d confirmed, %d rejected, stock 0", st, stock, units, excess)
	}
	var reason string
	if err := s.db.QueryRow(`SELECT DISTINCT reason FROM seckill_orders WHERE sku = ? AND status = 'rejected'`, sku).Scan(&reason); err != nil || reason != sink.ReasonSoldOut {
		t.Fatalf("rejection reason %q (%v)", reason, err)
	}
	s.waitOutboxEmpty(t, sku, 30*time.Second)
	var lines []string
	eventually(t, 10*time.Second, "CHECK sees every outcome", func() bool {
		lines, _ = c.Do(ctx, "seckill.check", sku).StringSlice()
		return len(lines) > 0 && !strings.Contains(strings.Join(lines, "\n"), "in flight")
	})
	// The stock and the buyers agree once MySQL has refused the excess: the rejections are
	// the difference.
	if len(lines) != 1+excess || lines[0] != fmt.Sprintf("rejected orders: %d sold in Redis that MySQL refused", excess) {
		t.Fatalf("CHECK = %q", lines)
	}
	rows, err := s.db.Query(`SELECT order_id, uid FROM seckill_orders WHERE sku = ? AND status = 'rejected'`, sku)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	listed := strings.Join(lines[1:], "\n")
	for rows.Next() {
		var id, uid string
		if err := rows.Scan(&id, &uid); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("rejected order %s: uid %s qty 1, sold out", id, uid); !strings.Contains(listed, want) {
			t.Fatalf("CHECK does not list %q:\n%s", want, listed)
		}
	}
}

// TestDeadLetter: a malformed message goes to the dead-letter topic with its error, and the
// orders after it are still stored.
func TestDeadLetter(t *testing.T) {
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	c := s.client(t, 1)
	sku := newSKU("dlq")
	s.sale(t, c, sku, 10)
	produce(t, cfg, sku, []byte(`{"v":1,"type":"order","order_id":`), []byte(`{"v":99}`))
	ids, _ := buyAll(t, c, sku, "u", 3, 1)
	runSink(t, cfg)
	s.waitConfirmed(t, sku, 3, 30*time.Second)
	s.checkOrdersInMySQL(t, sku, ids)

	sc, err := connect.Sarama(cfg.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := sarama.NewConsumer(cfg.Kafka.Brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	parts, err := consumer.Partitions(cfg.Kafka.DeadLetterTopic)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan *sarama.ConsumerMessage, 16)
	for _, p := range parts {
		pc, err := consumer.ConsumePartition(cfg.Kafka.DeadLetterTopic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		go func() {
			for m := range pc.Messages() {
				msgs <- m
			}
		}()
	}
	var got []*sarama.ConsumerMessage
	for len(got) < 2 {
		select {
		case m := <-msgs:
			got = append(got, m)
		case <-time.After(30 * time.Second):
			t.Fatalf("%d dead letters within 30s, want 2", len(got))
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d dead letters, want 2", len(got))
	}
	for _, m := range got {
		var reason string
		for _, h := range m.Headers {
			if string(h.Key) == "error" {
				reason = string(h.Value)
			}
		}
		if reason == "" {
			t.Errorf("dead letter %q has no error header", m.Value)
		}
	}
}
