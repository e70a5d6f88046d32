package guard

import (
	"context"
	"testing"
	"time"

	"github.com/rs/xid"

	"seckill-proxy/conf"
)

func BenchmarkParseBuy(b *testing.B) {
	args := [][]byte{[]byte("sku_1001"), []byte("user_123456"), []byte("1")}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseBuy(args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOrderID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = xid.New().String()
	}
}

// BenchmarkBuySoldOut is the whole sold-out path of a buy in the guard: the flag answers, and
// nothing goes to Redis.
func BenchmarkBuySoldOut(b *testing.B) {
	g := &Guard{opt: Options{Buy: conf.Default().Buy, MaxInflight: 1, Now: time.Now}, flags: NewFlags(time.Hour)}
	g.flags.SetSoldOut("sku_1001", time.Now(), &Buyers{Orders: map[string]string{"u0": "o0"}}, g.flags.Gen())
	reqs := []BuyRequest{{SKU: "sku_1001", UID: "u1", Qty: 1}}
	ctx := context.Background()
	var res []BuyResult
	b.ReportAllocs()
	for b.Loop() {
		if res = g.BuyBatch(ctx, reqs, res); res[0].Err == nil {
			b.Fatal("not sold out")
		}
	}
}
