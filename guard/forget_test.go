package guard

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill-proxy/conf"
	"seckill-proxy/sale"
)

// TestRetiredForgotten: a sale the sweeper retired leaves this proxy's memory (its counters
// and rate) and the others are told; another proxy's retire event is believed only once the
// sale is out of the set of sales.
func TestRetiredForgotten(t *testing.T) {
	ctx := context.Background()
	a, b := "retired_a_"+t.Name(), "retired_b_"+t.Name()
	rc, _ := openTestSale(t, a, "1", 10, 1)
	if err := rc.SAdd(ctx, sale.SalesKey, a).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.SRem(context.Background(), sale.SalesKey, a) })
	g := newAdmissionGuard(t, rc, conf.Default().Admission)
	for _, sku := range []string{a, b} {
		g.setRate(sku, 5, 1)
		g.versions.Store(sku, "1")
	}
	sub := rc.Subscribe(ctx, sale.EventsChannel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	g.apply(ctx, eventRetire+" "+a+" another-proxy")
	if _, ok := g.counters(a); !ok || g.localRate(a) != 5 {
		t.Fatal("a retire event of a sale still in the set of sales was believed")
	}
	if err := rc.SRem(ctx, sale.SalesKey, a).Err(); err != nil {
		t.Fatal(err)
	}
	g.apply(ctx, eventRetire+" "+a+" another-proxy")
	if _, ok := g.counters(a); ok || g.localRate(a) != 0 {
		t.Error("a retired sale's counters or rate are still held after the event")
	}
	if _, ok := g.versions.Load(a); ok {
		t.Error("a retired sale's version is still held")
	}

	g.Retired(b)
	if _, ok := g.counters(b); ok || g.localRate(b) != 0 {
		t.Error("the sale this proxy retired is still held")
	}
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for { // other proxies on the dev stack may publish meanwhile
		msg, err := sub.ReceiveMessage(mctx)
		if err != nil {
			t.Fatalf("no %q event for the other proxies: %v", eventRetire+" "+b+" test", err)
		}
		if msg.Payload == eventRetire+" "+b+" test" {
			break
		}
	}
}

// TestOwnDuplicateIsTheOrder: a call that ran twice (its first reply lost) answers DUPLICATE
// with the attempt's own order id: the buyer is told that order (with reply_after=kafka, not
// known, since it was never teed); a DUPLICATE of another order id stays a duplicate.
func TestOwnDuplicateIsTheOrder(t *testing.T) {
	for _, tt := range []struct {
		name, replyID, after string
		want                 func(BuyResult) bool
	}{
		{"own, reply after lua", "o1", conf.ReplyAfterLua, func(r BuyResult) bool { return r.Err == nil && r.OrderID == "o1" }},
		{"own, reply after kafka", "o1", conf.ReplyAfterKafka, func(r BuyResult) bool { return errors.Is(r.Err, ErrUnavailable) }},
		{"another's", "o0", conf.ReplyAfterLua, func(r BuyResult) bool {
			var d *DuplicateError
			return errors.As(r.Err, &d) && d.OrderID == "o0"
		}},
	} {
		buy := conf.Default().Buy
		buy.ReplyAfter = tt.after
		g := &Guard{opt: Options{Buy: buy, MaxInflight: 1, Now: time.Now}, flags: NewFlags(time.Hour), adm: newAdmission(conf.Default().Admission)}
		a := &Attempt{req: BuyRequest{SKU: "s", UID: "u", Qty: 1}, orderID: "o1", version: "1", reply: []string{"DUPLICATE", tt.replyID}}
		var res BuyResult
		if retry := g.settle(a, &res, 0); retry || !tt.want(res) {
			t.Errorf("%s: %+v (retry %v)", tt.name, res, retry)
		}
		if a.sold.OrderID != "" {
			t.Errorf("%s: the order would be teed again (%+v)", tt.name, a.sold)
		}
	}
}
