package guard

import (
	"bufio"
	"context"
	"errors"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/internal/resp"
	"seckill-proxy/sale"
)

// TestManyCallNamesScriptKeys: buymany.lua names each SKU's keys from its tag as
// Keys.ScriptKeys has them, in buy.lua's order, for a sale and for a split sale's bucket.
func TestManyCallNamesScriptKeys(t *testing.T) {
	m := regexp.MustCompile(`local names = \{([^}]*)\}`).FindStringSubmatch(buyManyTail)
	if m == nil {
		t.Fatal("buymany.lua names no keys")
	}
	var names []string
	for _, n := range strings.Split(m[1], ",") {
		names = append(names, strings.Trim(n, " '"))
	}
	for _, bucket := range []int{0, 3} {
		tag, keys := sale.Tag("phone", bucket), sale.BucketKeys("phone", bucket).ScriptKeys()
		if len(keys) != len(names) {
			t.Fatalf("%d names for %d keys", len(names), len(keys))
		}
		for i, n := range names {
			if got := sale.Key(tag, n); got != keys[i] {
				t.Errorf("tag %s key %d: buymany.lua names %q, ScriptKeys has %q", tag, i, got, keys[i])
			}
		}
	}
}

// TestManyCallAsAlone: one call of buymany.lua on a master, for two SKUs it owns and one it
// does not, answers each of its SKUs what buy.lua alone would (a duplicate within the call, a
// quantity above the limit, sold out), and NOTHERE for the third, whose keys stay untouched.
func TestManyCallAsAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := "many_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	rc, k1 := openTestSale(t, base+"_0", "7", 3, 2)
	master, err := rc.MasterForKey(ctx, k1.Meta)
	if err != nil {
		t.Fatal(err)
	}
	var same, other string
	for i := 1; same == "" || other == ""; i++ {
		sku := base + "_" + strconv.Itoa(i)
		m, err := rc.MasterForKey(ctx, sale.KeysFor(sku).Meta)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m.Options().Addr == master.Options().Addr && same == "":
			same = sku
		case m.Options().Addr != master.Options().Addr && other == "":
			other = sku
		}
	}
	_, k2 := openTestSale(t, same, "7", 1, 1)
	_, k3 := openTestSale(t, other, "7", 5, 1)
	g := New(rc, nil, zap.NewNop(), Options{Buy: conf.Default().Buy, MaxInflight: 100, Instance: "test"})
	t.Cleanup(g.Close)
	start := func(reqs ...BuyRequest) []*Attempt {
		var as []*Attempt
		for i := range reqs {
			a, err := g.Start(&reqs[i])
			if err != nil {
				t.Fatal(err)
			}
			as = append(as, a)
		}
		return as
	}
	groups := [][]*Attempt{
		start(BuyRequest{SKU: base + "_0", UID: "a", Qty: 2}, BuyRequest{SKU: base + "_0", UID: "a", Qty: 1},
			BuyRequest{SKU: base + "_0", UID: "b", Qty: 3}, BuyRequest{SKU: base + "_0", UID: "c", Qty: 2}),
		start(BuyRequest{SKU: same, UID: "d", Qty: 1}, BuyRequest{SKU: same, UID: "e", Qty: 1}),
		start(BuyRequest{SKU: other, UID: "f", Qty: 1}),
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", master.Options().Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rw := bufio.NewReadWriter(bufio.NewReader(nc), bufio.NewWriter(nc))
	raw := roundTrip(t, rw, g.AppendManyCall(nil, groups, true))
	vals, err := resp.SplitArray(raw)
	if err != nil || len(vals) != 3 {
		t.Fatalf("reply %q: %d values (%v), want 3", raw, len(vals), err)
	}
	if !NotHere(vals[2]) {
		t.Errorf("the SKU of another master answered %q, want NOTHERE", vals[2])
	}
	var res []BuyResult
	for i, as := range groups[:2] {
		for _, o := range g.SettleCall(as, vals[i], 0, true, nil) {
			if o.Retry {
				t.Fatalf("group %d: a retry: %+v", i, o)
			}
			res = append(res, o.Result)
		}
	}
	var dup *DuplicateError
	switch {
	case res[0].Err != nil || res[0].OrderID == "":
		t.Errorf("a: %+v, want an order", res[0])
	case !errors.As(res[1].Err, &dup) || dup.OrderID != res[0].OrderID:
		t.Errorf("a again: %+v, want DUPLICATE %s", res[1], res[0].OrderID)
	case !errors.Is(res[2].Err, ErrBadArgs):
		t.Errorf("b, above the limit: %+v", res[2])
	case !errors.Is(res[3].Err, ErrSoldOut):
		t.Errorf("c, 1 left of 3: %+v, want SOLDOUT", res[3])
	case res[4].Err != nil || res[4].OrderID == "":
		t.Errorf("d: %+v, want an order", res[4])
	case !errors.Is(res[5].Err, ErrSoldOut):
		t.Errorf("e: %+v, want SOLDOUT", res[5])
	}
	for _, c := range []struct {
		k     sale.Keys
		stock string
	}{{k1, "1"}, {k2, "0"}, {k3, "5"}} {
		if got, err := rc.Get(ctx, c.k.Stock).Result(); err != nil || got != c.stock {
			t.Errorf("%s = %q (%v), want %s", c.k.Stock, got, err, c.stock)
		}
	}
	if n, err := rc.HLen(ctx, k3.Buyers).Result(); err != nil || n != 0 {
		t.Errorf("the other master's SKU has %d buyers (%v), want none", n, err)
	}
	// The script is cached by the EVAL: the next call goes as EVALSHA.
	again := start(BuyRequest{SKU: same, UID: "g", Qty: 1}, BuyRequest{SKU: base + "_0", UID: "h", Qty: 1})
	if raw = roundTrip(t, rw, g.AppendManyCall(nil, [][]*Attempt{again[:1], again[1:]}, false)); raw[0] != '*' {
		t.Errorf("EVALSHA after EVAL: %q", raw)
	}
}
