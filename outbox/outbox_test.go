package outbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/salescan"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/sale"
)

// fixture is a tee on a topic of its own, in front of the dev stack, and a SKU of its own.
type fixture struct {
	cfg conf.Config
	rc  *redis.ClusterClient
	tee *Tee
	sku string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	testenv.Redis(t)
	testenv.Kafka(t)
	cfg := testenv.Config(t)
	cfg.Kafka.Topic = "test.outbox." + xid.New().String()
	t.Cleanup(func() { testenv.DeleteTopics(t, cfg.Kafka.Brokers, cfg.Kafka.Topic) }) // after the fixture's producers stop
	if err := connect.EnsureTopics(cfg.Kafka); err != nil {
		t.Fatal(err)
	}
	// A new topic's partitions get their leaders a moment after it is created; a producer that
	// asks before then is told the partition does not exist.
	sc, err := connect.Sarama(cfg.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := sarama.NewClient(cfg.Kafka.Brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	await(t, "the new topic's partitions to have leaders", func() bool {
		if kc.RefreshMetadata(cfg.Kafka.Topic) != nil {
			return false
		}
		parts, err := kc.Partitions(cfg.Kafka.Topic)
		if err != nil || len(parts) != cfg.Kafka.Partitions {
			return false
		}
		for _, p := range parts {
			if _, err := kc.Leader(cfg.Kafka.Topic, p); err != nil {
				return false
			}
		}
		return true
	})
	_ = kc.Close()
	rc := connect.Redis(cfg.Redis)
	t.Cleanup(func() { _ = rc.Close() })
	tee := NewTee(rc, cfg, "outbox-test", zap.NewNop())
	if err := tee.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tee.Close() })
	f := &fixture{cfg: cfg, rc: rc, tee: tee, sku: "outbox_" + xid.New().String()}
	t.Cleanup(func() {
		k := sale.KeysFor(f.sku)
		ctx := context.Background()
		_ = rc.SRem(ctx, sale.SalesKey, f.sku).Err()
		_ = rc.Del(ctx, k.Outbox, k.Dead, k.Meta, k.SweepLease).Err()
	})
	await(t, "the tee's producer to connect", tee.Healthy)
	return f
}

// await polls cond until it holds, for at most 30 s.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// add writes n outbox entries as buy.lua writes them and returns the orders.
func (f *fixture) add(t *testing.T, n int) []sale.Sold {
	t.Helper()
	ctx := context.Background()
	var out []sale.Sold
	for i := range n {
		s := sale.Sold{Kind: sale.TypeOrder, OrderID: xid.New().String(), SKU: f.sku, UID: fmt.Sprintf("u%d", i),
			Qty: 1, Version: 1, TS: time.Now().UnixMilli(), By: "outbox-test"}
		id, err := f.rc.XAdd(ctx, &redis.XAddArgs{Stream: sale.KeysFor(f.sku).Outbox, Values: sale.EntryFields(s)}).Result()
		if err != nil {
			t.Fatal(err)
		}
		s.EntryID = id
		out = append(out, s)
	}
	return out
}

// consumed reads the tee's topic from the start until it has want messages, and returns the
// orders by id.
func (f *fixture) consumed(t *testing.T, want int) map[string]sale.Order {
	t.Helper()
	sc, err := connect.Sarama(f.cfg.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sarama.NewConsumer(f.cfg.Kafka.Brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	parts, err := c.Partitions(f.cfg.Kafka.Topic)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan *sarama.ConsumerMessage)
	for _, p := range parts {
		pc, err := c.ConsumePartition(f.cfg.Kafka.Topic, p, sarama.OffsetOldest)
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
	out := map[string]sale.Order{}
	timeout := time.After(30 * time.Second)
	for len(out) < want { // this sale's orders: a sweep may republish another sale's on the topic too
		select {
		case m := <-msgs:
			o, err := sale.DecodeOrder(m.Value)
			if err != nil {
				t.Fatalf("message %q: %v", m.Value, err)
			}
			if string(m.Key) != o.SKU {
				t.Errorf("message of %s keyed %q", o.SKU, m.Key)
			}
			if o.SKU == f.sku {
				out[o.OrderID] = o
			}
		case <-timeout:
			t.Fatalf("%d of %d orders on %s after 30 s", len(out), want, f.cfg.Kafka.Topic)
		}
	}
	return out
}

func (f *fixture) outboxLen(t *testing.T) int64 {
	t.Helper()
	n, err := f.rc.XLen(context.Background(), sale.KeysFor(f.sku).Outbox).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTeeDeliversThenDeletes: every order the tee takes is acknowledged by Kafka (done is
// called with nil once each), arrives on the topic keyed by its SKU with every field, and only
// then leaves the outbox.
func TestTeeDeliversThenDeletes(t *testing.T) {
	f := newFixture(t)
	sold := f.add(t, 20)
	acks := make(chan error, len(sold))
	for _, s := range sold[:10] {
		f.tee.Publish(s, func(err error) { acks <- err })
	}
	f.tee.PublishBatch(sold[10:])
	for range 10 {
		if err := <-acks; err != nil {
			t.Fatalf("an order was not acknowledged: %v", err)
		}
	}
	got := f.consumed(t, len(sold))
	for _, s := range sold {
		o, ok := got[s.OrderID]
		if !ok || o.UID != s.UID || o.SKU != s.SKU || o.Qty != 1 || o.SaleVersion != 1 || o.TS != s.TS || o.Proxy != s.By || o.Type != sale.TypeOrder {
			t.Errorf("order %s: %+v, sent %+v", s.OrderID, o, s)
		}
	}
	await(t, "the acknowledged entries to leave the outbox", func() bool { return f.outboxLen(t) == 0 })
	if st := f.tee.Stats(); st.Published != 20 || st.Acked != 20 || st.Deleted != 20 || st.Failed != 0 {
		t.Errorf("stats %+v, want 20 published, acked and deleted", st)
	}
}

// TestTeeClosed: an order given to a closed tee is failed at once, and stays in its outbox.
func TestTeeClosed(t *testing.T) {
	f := newFixture(t)
	sold := f.add(t, 1)
	if err := f.tee.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	f.tee.Publish(sold[0], func(err error) { done <- err })
	if err := <-done; err != ErrClosed {
		t.Errorf("publish after Close: %v, want ErrClosed", err)
	}
	if n := f.outboxLen(t); n != 1 {
		t.Errorf("outbox holds %d entries, want the 1 not delivered", n)
	}
}

// TestSweeper: one sweep republishes the entries older than the sweep age and no younger
// one; moves an unreadable entry to the dead letters once; a second sweeper in the same
// lease term takes nothing; a sale of another route is left alone; and once the outbox is
// drained, a sale that is over leaves the set of sales.
func TestSweeper(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	k := sale.KeysFor(f.sku)
	old := f.add(t, 5)
	if err := f.rc.XAdd(ctx, &redis.XAddArgs{Stream: k.Outbox, Values: []string{"order", "", "qty", "x"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.rc.SAdd(ctx, sale.SalesKey, f.sku).Err(); err != nil {
		t.Fatal(err)
	}
	now, err := f.rc.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The young entries get IDs of a later millisecond than the sweep's cutoff.
	await(t, "Redis's clock to pass the cutoff", func() bool {
		later, err := f.rc.Time(ctx).Result()
		return err == nil && later.UnixMilli() > now.UnixMilli()+1
	})
	cfg := f.cfg.Outbox
	young := f.add(t, 2)

	// A proxy on another topic leaves the sale alone.
	other := f.cfg
	other.Kafka.Topic = f.cfg.Kafka.Topic + ".other"
	drifted := NewSweeper(f.rc, &Tee{kafka: other.Kafka, producer: f.tee.producer}, cfg, "drifted", nil, zap.NewNop())
	if err := f.rc.HSet(ctx, k.Meta, "route", f.tee.Route()).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := drifted.SweepOnce(ctx, now.Add(cfg.SweepAge+time.Second)); err != nil || drifted.Stats().Drifted < 1 {
		t.Fatalf("a sweeper of another route: %v, stats %+v", err, drifted.Stats())
	}
	if n, err := f.rc.Exists(ctx, k.SweepLease).Result(); err != nil || n != 0 || f.outboxLen(t) != int64(len(old)+1+len(young)) {
		t.Fatalf("a sweeper of another route took the lease (%d, %v) or the entries (%d left)", n, err, f.outboxLen(t))
	}

	s1 := NewSweeper(f.rc, f.tee, cfg, "one", nil, zap.NewNop())
	s2 := NewSweeper(f.rc, f.tee, cfg, "two", nil, zap.NewNop())
	// Other sales of the dev stack may be in the set too: what is checked is this sale's.
	n, err := s1.SweepOnce(ctx, now.Add(cfg.SweepAge))
	if err != nil || n < len(old) {
		t.Fatalf("first sweep: %d republished, %v; want the %d old entries", n, err, len(old))
	}
	if lease, err := f.rc.Get(ctx, k.SweepLease).Result(); err != nil || lease != "one" {
		t.Errorf("the sale's sweep lease: %q, %v; want the first sweeper's", lease, err)
	}
	before := s2.Stats().Republished
	if _, err := s2.SweepOnce(ctx, now.Add(cfg.SweepAge)); err != nil {
		t.Fatal(err)
	}
	if s2.Stats().Buried != 0 || f.outboxLen(t) < int64(len(young)) {
		t.Errorf("a second sweeper within the lease touched the sale: %+v (before: %d republished)", s2.Stats(), before)
	}
	if st := s1.Stats(); st.Buried != 1 {
		t.Errorf("stats %+v, want the 1 unreadable entry buried", st)
	}
	if d, err := f.rc.XLen(ctx, k.Dead).Result(); err != nil || d != 1 {
		t.Errorf("dead letters: %d, %v; want 1", d, err)
	}
	got := f.consumed(t, len(old))
	for _, s := range old {
		if _, ok := got[s.OrderID]; !ok {
			t.Errorf("old order %s was not republished", s.OrderID)
		}
	}
	for _, s := range young {
		if _, ok := got[s.OrderID]; ok {
			t.Errorf("young order %s was republished before the sweep age", s.OrderID)
		}
	}
	await(t, "the republished entries to leave the outbox", func() bool { return f.outboxLen(t) == int64(len(young)) })

	// Over, and drained: the next sweep takes the sale out of the set.
	if err := f.rc.XTrimMaxLen(ctx, k.Outbox, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.rc.HSet(ctx, k.Meta, "state", "closed").Err(); err != nil {
		t.Fatal(err)
	}
	await(t, "the drained, closed sale to leave the set of sales", func() bool {
		if err := f.rc.Del(ctx, k.SweepLease).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s1.SweepOnce(ctx, now.Add(cfg.SweepAge)); err != nil {
			t.Fatal(err)
		}
		in, err := f.rc.SIsMember(ctx, sale.SalesKey, f.sku).Result()
		return err == nil && !in
	})
	if s1.Stats().Retired != 1 {
		t.Errorf("stats %+v, want 1 retired", s1.Stats())
	}
}

// TestSweepPending: a sweep reads the pending buckets: an old entry of a sale nobody marked
// waits for the pass over every sale (sweepChunk, a chunk at a time), which republishes it
// and marks the sale pending; a marked sale's entries are republished by the next pending sweep; and a bucket
// with nothing left leaves the pending set once nobody has marked it for the quiet time.
func TestSweepPending(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	route := f.tee.Route()
	t.Cleanup(func() { f.rc.ZRem(context.Background(), salescan.PendingKey(route), f.sku) })
	if err := f.rc.HSet(ctx, sale.KeysFor(f.sku).Meta, "state", "open", "end", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.rc.SAdd(ctx, sale.SalesKey, f.sku).Err(); err != nil {
		t.Fatal(err)
	}
	pending := func() bool {
		_, err := f.rc.ZScore(ctx, salescan.PendingKey(route), f.sku).Result()
		return err == nil
	}
	old := f.add(t, 3)
	now, err := f.rc.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(f.cfg.Outbox.SweepAge + time.Second)
	s := NewSweeper(f.rc, f.tee, f.cfg.Outbox, "pending-test", nil, zap.NewNop())
	if n, err := s.SweepPending(ctx, later); err != nil || n != 0 || pending() {
		t.Fatalf("a pending sweep of an unmarked sale: %d republished, %v, pending %v; want nothing", n, err, pending())
	}
	// The pass over every sale, a chunk at a time from cursor 0 until it comes back to 0.
	total, cursor := 0, uint64(0)
	for first := true; first || cursor != 0; first = false {
		var n int
		if n, cursor, err = s.sweepChunk(ctx, later, cursor, 100); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total < len(old) || !pending() {
		t.Fatalf("the pass over every sale: %d republished, pending %v; want %d, and the sale marked", total, pending(), len(old))
	}
	f.consumed(t, len(old))
	await(t, "the republished entries to leave the outbox", func() bool { return f.outboxLen(t) == 0 })

	more := f.add(t, 2)
	if err := f.rc.Del(ctx, sale.KeysFor(f.sku).SweepLease).Err(); err != nil {
		t.Fatal(err)
	}
	if now, err = f.rc.Time(ctx).Result(); err != nil {
		t.Fatal(err)
	}
	later = now.Add(f.cfg.Outbox.SweepAge + time.Second)
	if n, err := s.SweepPending(ctx, later); err != nil || n != len(more) {
		t.Fatalf("a pending sweep of the marked sale: %d republished, %v; want %d", n, err, len(more))
	}
	await(t, "the republished entries to leave the outbox", func() bool { return f.outboxLen(t) == 0 })
	if _, err := s.SweepPending(ctx, later); err != nil || !pending() {
		t.Fatalf("a bucket marked just now left the pending set (%v): a proxy may still be selling there", err)
	}
	if err := salescan.Unmark(ctx, f.rc, salescan.PendingKey(route), []string{f.sku}, 0); err != nil || pending() {
		t.Fatalf("unmarked with no quiet time: %v, still pending %v", err, pending())
	}
}

// TestDeleteBatchAcrossMasters: the acknowledged entries of buckets spread over every master
// leave their outboxes in one call per master; a bucket whose outbox cannot be touched (here a
// key of the wrong type) is tried again on its own and counted as an error, and costs the
// others nothing.
func TestDeleteBatchAcrossMasters(t *testing.T) {
	testenv.Redis(t)
	cfg := testenv.Config(t)
	rc := connect.Redis(cfg.Redis)
	t.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	core, logs := observer.New(zap.DebugLevel)
	tee := NewTee(rc, cfg, "outbox-test", zap.New(core))
	base := "xdel_" + xid.New().String()
	batch := map[string][]string{}
	var keys []string
	for i := range 60 {
		tag := fmt.Sprintf("%s_%d", base, i)
		key := sale.Key(tag, "outbox")
		keys = append(keys, key)
		for range 3 {
			id, err := rc.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"f", "v"}}).Result()
			if err != nil {
				t.Fatal(err)
			}
			batch[tag] = append(batch[tag], id)
		}
		if _, err := rc.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"f", "kept"}}).Result(); err != nil {
			t.Fatal(err)
		}
	}
	broken := base + "_broken"
	keys = append(keys, sale.Key(broken, "outbox"))
	if err := rc.Set(ctx, sale.Key(broken, "outbox"), "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	batch[broken] = []string{"1-1"}
	t.Cleanup(func() {
		for _, k := range keys {
			_ = rc.Del(ctx, k).Err()
		}
	})
	masters, errs := salescan.ByMaster(ctx, rc, slices.Collect(maps.Keys(batch)))
	if len(errs) != 0 || len(masters) < 2 {
		t.Fatalf("the buckets fall on %d masters (errors %v); the test needs several", len(masters), errs)
	}
	tee.deleteBatch(ctx, batch)
	for _, k := range keys[:60] {
		if n, err := rc.XLen(ctx, k).Result(); err != nil || n != 1 {
			t.Errorf("%s holds %d entries (%v), want only the one not acknowledged", k, n, err)
		}
	}
	if st := tee.Stats(); st.Deleted != 180 || st.DeleteErrors != 1 {
		t.Errorf("deleted %d with %d errors, want 180 and 1 (the broken bucket)", st.Deleted, st.DeleteErrors)
	}
	if n := logs.FilterMessageSnippet("in one call").Len(); n != 0 {
		t.Errorf("%d masters' calls failed whole: %v", n, logs.All())
	}
}
