package guard

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/sale"
)

// TestEventsAreHints: a close or soldout event changes a proxy's flags only as far as the sale
// in Redis bears it out, so that one published by anyone else changes nothing; a proxy's own
// events are skipped; a sold-out flag knows the sale's buyers.
func TestEventsAreHints(t *testing.T) {
	cfg := conf.Default()
	cfg.Redis.Addrs = testenv.Redis(t)
	rc := connect.Redis(cfg.Redis)
	t.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	sku := "hint_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	k := sale.KeysFor(sku)
	t.Cleanup(func() { rc.Del(context.Background(), k.Meta, k.Stock, k.Buyers) })
	if err := rc.HSet(ctx, k.Meta, "state", "open", "version", "1").Err(); err != nil {
		t.Fatal(err)
	}
	rc.Set(ctx, k.Stock, 5, 0)
	rc.HSet(ctx, k.Buyers, "u1", "order1:1", "u2", "released:order2:1")
	cfg.Buy.SoldOutReprobe = time.Hour
	g := New(rc, nil, zap.NewNop(), Options{Buy: cfg.Buy, MaxInflight: 10, Instance: "me"})
	t.Cleanup(g.Close)
	flag := func() (bool, string, *Buyers) { return g.flags.Get(sku, time.Now()) }

	g.apply(ctx, "close "+sku+" forger")
	g.apply(ctx, "soldout "+sku+" forger")
	if flagged, _, _ := flag(); flagged {
		t.Fatal("a close and a soldout that Redis does not bear out set a flag")
	}

	rc.Set(ctx, k.Stock, 0, 0)
	g.apply(ctx, "soldout "+sku+" me")
	if flagged, _, _ := flag(); flagged {
		t.Fatal("the proxy's own soldout event set the flag")
	}
	g.apply(ctx, "soldout "+sku+" other")
	deadline := time.Now().Add(5 * time.Second)
	for flagged, _, _ := flag(); !flagged; flagged, _, _ = flag() {
		if time.Now().After(deadline) {
			t.Fatal("a soldout event that Redis bears out set no flag")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, closed, b := flag()
	if id, ok := b.order("u1"); closed != "" || !ok || id != "order1" {
		t.Fatalf("sold-out flag: closed %q, u1's order %q %v; want order1", closed, id, ok)
	}
	if id, _ := b.order("u2"); id != "order2" {
		t.Fatalf("released buyer u2's order %q, want order2", id)
	}
	res := buyAll(ctx, t, g, []BuyRequest{{SKU: sku, UID: "u1", Qty: 1}, {SKU: sku, UID: "u3", Qty: 1}})
	if res[0].Err == nil || res[0].Err.Error() != "DUPLICATE order1" || res[1].Err == nil || res[1].Err.Error() != "SOLDOUT "+sku {
		t.Fatalf("flagged buys: %v, %v; want DUPLICATE order1 and SOLDOUT", res[0].Err, res[1].Err)
	}

	g.apply(ctx, "release "+sku+" me")
	if flagged, _, _ := flag(); !flagged {
		t.Fatal("the proxy's own release event cleared the flag")
	}
	g.apply(ctx, "release "+sku+" other")
	if flagged, _, _ := flag(); flagged {
		t.Fatal("a release event did not clear the flag")
	}

	g.apply(ctx, "close "+sku+" other")
	if _, closed, _ := flag(); closed != "" {
		t.Fatal("a close event set the closed flag on an open sale")
	}
	rc.HSet(ctx, k.Meta, "state", "closed")
	g.apply(ctx, "close "+sku+" other")
	if _, closed, _ := flag(); closed == "" {
		t.Fatal("a close event that Redis bears out did not set the closed flag")
	}
}
