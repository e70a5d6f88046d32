package sink

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/sale"
)

// TestOutcomesHeldByAReplica: the outcomes of a batch count as written only once WAIT says a
// replica holds them. Asked for more replicas than the master has (a view that does not know
// the master), WAIT comes back short and the calls are sent again until the session ends:
// writeOutcomes says false (the batch is not marked), and however often they were sent, each
// outcome is counted and streamed once. With the cluster's view, the same batch holds at once.
func TestOutcomesHeldByAReplica(t *testing.T) {
	cfg := testenv.Config(t)
	testenv.Redis(t)
	rc := connect.Redis(cfg.Redis)
	t.Cleanup(func() { _ = rc.Close() })
	cfg.Sink.RetryMin, cfg.Sink.RetryMax = 10*time.Millisecond, 20*time.Millisecond
	cfg.Buy.WaitReplicas, cfg.Buy.WaitTimeout = 5, 50*time.Millisecond
	s := NewSink(cfg, nil, rc, zap.NewNop())
	sku := "sinkwait_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	k := sale.KeysFor(sku)
	t.Cleanup(func() { rc.Del(context.Background(), k.Meta, k.Result, k.Outcomes) })
	const orders = 3
	var outs []Outcome
	for i := range orders {
		outs = append(outs, Outcome{OrderID: "o" + strconv.Itoa(i), SKU: sku, Status: StatusConfirmed, New: true, Version: 1, UID: "u" + strconv.Itoa(i)})
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s.writeOutcomes(ctx, outs) {
		t.Fatal("five replicas asked of a master with one: the outcomes were taken as held")
	}
	if retries := s.retries.Load(); retries < 2 {
		t.Fatalf("the calls were sent %d times again, want at least 2", retries)
	}
	check := func(when string) {
		t.Helper()
		bg := context.Background()
		if n, _ := rc.HGet(bg, k.Meta, StatusConfirmed).Int(); n != orders {
			t.Errorf("%s: meta counts %d confirmed, want %d", when, n, orders)
		}
		if n := rc.HLen(bg, k.Result).Val(); n != orders {
			t.Errorf("%s: %d outcomes in the result hash, want %d", when, n, orders)
		}
		if n := rc.XLen(bg, k.Outcomes).Val(); n != 1 {
			t.Errorf("%s: %d entries in the outcome stream, want 1", when, n)
		}
	}
	check("after the short WAITs")

	view, err := connect.ReadReplicas(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	s.replicas.Set(view)
	if !s.writeOutcomes(context.Background(), outs) {
		t.Fatal("with the cluster's view of the replicas, the outcomes were not held")
	}
	check("sent once more")

	// A reply no failover explains (a result key of the wrong type) is given up at once, not
	// sent again for ever: MySQL holds the truth, the late-order watch shows the orders.
	bad := sale.KeysFor(sku + "_wrongtype")
	t.Cleanup(func() { rc.Del(context.Background(), bad.Meta, bad.Result, bad.Outcomes) })
	if err := rc.Set(context.Background(), bad.Result, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := s.retries.Load()
	if !s.writeOutcomes(context.Background(), []Outcome{{OrderID: "w", SKU: sku + "_wrongtype", Status: StatusConfirmed, New: true, Version: 1, UID: "w"}}) {
		t.Fatal("a call Redis refused for good kept the batch from being marked")
	}
	if n := s.retries.Load() - before; n != 0 {
		t.Errorf("a call Redis refused for good was sent again %d times", n)
	}
}
