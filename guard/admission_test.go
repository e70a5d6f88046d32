package guard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/sale"
)

// newAdmissionGuard is a guard on rc with the default buy settings and adm, closed when the
// test ends.
func newAdmissionGuard(t *testing.T, rc *redis.ClusterClient, adm conf.Admission) *Guard {
	g := New(rc, nil, zap.NewNop(), Options{Buy: conf.Default().Buy, MaxInflight: 100, Instance: "test", Admission: adm})
	t.Cleanup(g.Close)
	return g
}

// TestShedFirstComeFirstServed: with admission.max_waiting_per_sku 2, a batch of five buys of
// one SKU sends the first two, in the order they came, and answers the other three BUSY at
// once; the SKU's waiting count is back to zero afterwards.
func TestShedFirstComeFirstServed(t *testing.T) {
	ctx := context.Background()
	sku := "shed_" + t.Name()
	rc, _ := openTestSale(t, sku, "1", 10, 1)
	cfg := conf.Default()
	cfg.Admission.MaxWaitingPerSKU = 2
	g := newAdmissionGuard(t, rc, cfg.Admission)
	reqs := []BuyRequest{{SKU: sku, UID: "a", Qty: 1}, {SKU: sku, UID: "b", Qty: 1}, {SKU: sku, UID: "c", Qty: 1},
		{SKU: sku, UID: "d", Qty: 1}, {SKU: sku, UID: "e", Qty: 1}}
	res := buyAll(ctx, t, g, reqs)
	for i, r := range res {
		if i < 2 && r.Err != nil {
			t.Errorf("buy %d (came %d of 5): %v, want an order", i, i+1, r.Err)
		}
		if i >= 2 && !errors.Is(r.Err, ErrBusy) {
			t.Errorf("buy %d (came %d of 5): %+v, want BUSY", i, i+1, r)
		}
	}
	if st := g.Stats(); st.Shed != 3 {
		t.Errorf("shed %d, want 3", st.Shed)
	}
	if res = buyAll(ctx, t, g, reqs[2:4]); res[0].Err != nil || res[1].Err != nil {
		t.Errorf("after the batch, the waiting count did not come back down: %+v", res)
	}
}

// TestSetAdmissionLimits: a reload's limits take effect for the next buys: a wider bound on
// waiting buys lets a batch through that the first bound shed, and a per-buyer limit set
// from none refuses a buyer's second attempt.
func TestSetAdmissionLimits(t *testing.T) {
	ctx := context.Background()
	sku := "reload_" + t.Name()
	rc, _ := openTestSale(t, sku, "1", 100, 5)
	cfg := conf.Default()
	cfg.Admission.MaxWaitingPerSKU = 1
	cfg.Admission.BuyerAttempts = 0
	g := newAdmissionGuard(t, rc, cfg.Admission)
	reqs := []BuyRequest{{SKU: sku, UID: "a", Qty: 1}, {SKU: sku, UID: "b", Qty: 1}}
	if res := buyAll(ctx, t, g, reqs); !errors.Is(res[1].Err, ErrBusy) {
		t.Fatalf("with a bound of 1, the second buy of a batch: %+v, want BUSY", res[1])
	}
	next := cfg.Admission
	next.MaxWaitingPerSKU = 10
	next.BuyerAttempts = 1
	g.SetAdmissionLimits(next)
	res := buyAll(ctx, t, g, []BuyRequest{{SKU: sku, UID: "c", Qty: 1}, {SKU: sku, UID: "d", Qty: 1}})
	for i, r := range res {
		if r.Err != nil {
			t.Errorf("buy %d after the bound was raised: %v", i, r.Err)
		}
	}
	res = buyAll(ctx, t, g, []BuyRequest{{SKU: sku, UID: "c", Qty: 1}})
	var lim *LimitedError
	if !errors.As(res[0].Err, &lim) || lim.Reason != LimitedBuyer {
		t.Errorf("a second attempt of c after the per-buyer limit was set: %v, want LIMITED buyer", res[0].Err)
	}
}

// TestRatesFollowBuys: a proxy reads every sale's rate once at start, then no rate while
// nobody buys, however many sales are open; a rate changed behind its back (an event lost)
// reaches it within a sync interval of its next buy of that sale, and an event's sale is read
// at once.
func TestRatesFollowBuys(t *testing.T) {
	ctx := context.Background()
	a, b := "rates_a_"+t.Name(), "rates_b_"+t.Name()
	rc, ka := openTestSale(t, a, "1", 10, 1)
	_, kb := openTestSale(t, b, "1", 10, 1)
	for k, rate := range map[string]int{ka.Meta: 5, kb.Meta: 7} {
		if err := rc.HSet(ctx, k, "rate", rate, "burst", 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.SAdd(ctx, sale.SalesKey, a, b).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.SRem(context.Background(), sale.SalesKey, a, b) })
	adm := conf.Default().Admission
	adm.SyncInterval = 20 * time.Millisecond
	g := newAdmissionGuard(t, rc, adm)
	rounds := func(n int64) { // n more sync rounds
		t.Helper()
		want := g.adm.syncRounds.Load() + n
		deadline := time.Now().Add(10 * time.Second)
		for g.adm.syncRounds.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d sync rounds in 10 s", n)
			}
			time.Sleep(adm.SyncInterval / 4)
		}
	}
	rounds(2)
	if g.localRate(a) != 5 || g.localRate(b) != 7 {
		t.Fatalf("after start: rates %d and %d, want 5 and 7", g.localRate(a), g.localRate(b))
	}
	rounds(2)
	idle := g.adm.rateReads.Load()
	rounds(5)
	if n := g.adm.rateReads.Load() - idle; n != 0 {
		t.Errorf("%d rates read in 5 rounds with no buy, want 0", n)
	}
	if err := rc.HSet(ctx, ka.Meta, "rate", 9).Err(); err != nil { // no event: as if lost
		t.Fatal(err)
	}
	rounds(3)
	if g.localRate(a) != 5 {
		t.Errorf("a's rate %d before any buy here, want the old 5 (no read while idle)", g.localRate(a))
	}
	c, _ := g.counters(a)
	g.touch(a, c, time.Now()) // a buy answered here
	rounds(3)
	if g.localRate(a) != 9 {
		t.Errorf("a's rate %d after a buy here, want 9", g.localRate(a))
	}
	if err := rc.HSet(ctx, kb.Meta, "rate", 11).Err(); err != nil {
		t.Fatal(err)
	}
	g.apply(ctx, eventLimit+" "+b+" another-proxy")
	rounds(2)
	if g.localRate(b) != 11 {
		t.Errorf("b's rate %d after its limit event, want 11", g.localRate(b))
	}
}
