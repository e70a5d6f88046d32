package guard

import (
	"errors"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rs/xid"

	"seckill-proxy/conf"
	"seckill-proxy/guard/admit"
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
	g := &Guard{opt: Options{Buy: conf.Default().Buy, MaxInflight: 1, Now: time.Now}, flags: NewFlags(time.Hour),
		adm: newAdmission(conf.Default().Admission)}
	g.flags.SetSoldOut("sku_1001", time.Now(), &Buyers{Orders: map[string]string{"u0": "o0"}}, g.flags.Gen())
	req := BuyRequest{SKU: "sku_1001", UID: "u1", Qty: 1}
	b.ReportAllocs()
	for b.Loop() {
		if res, ok := g.Local(&req, time.Now()); !ok || res.Err == nil {
			b.Fatal("not sold out")
		}
	}
}

// BenchmarkAdmitAllowed is the admission check of a buy that passes it, every check on: a
// deny list of 10,000 uids, a per-buyer limit over 1,024 buyers, the flags, the buyers this
// proxy sold to, and a sale rate with tokens in hand. The buy then goes to Redis.
func BenchmarkAdmitAllowed(b *testing.B) {
	opt := conf.Default().Admission
	opt.BuyerAttempts = admit.MaxAttempts
	opt.LeaseTTL = time.Hour
	g := &Guard{opt: Options{Buy: conf.Default().Buy, MaxInflight: 1, Now: time.Now}, flags: NewFlags(time.Hour),
		adm: newAdmission(opt)}
	denied := map[string]int64{}
	for i := range 10000 {
		denied["bad"+strconv.Itoa(i)] = 0
	}
	g.adm.deny.Set(denied)
	const sku = "sku_1001"
	g.setRate(sku, 1_000_000, 1_000_000)
	l := (*g.adm.rates.Load())[sku]
	_, _, call := l.Take(time.Now())
	l.Granted(time.Now(), call, 1<<60, 1_000_000, 1_000_000, 0)
	g.countersFor(sku).known.add("someone", "o1", "1", time.Now(), 10)
	reqs := make([]BuyRequest, 1024)
	for i := range reqs {
		reqs[i] = BuyRequest{SKU: sku, UID: "user_" + strconv.Itoa(100000+i), Qty: 1}
	}
	base := time.Now()
	runtime.GC() // the setup's garbage, not the loop's
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if res, answered := g.local(&reqs[i&1023], base.Add(time.Duration(i))); answered {
			b.Fatalf("refused: %v", res.Err)
		}
		i++
	}
}

// BenchmarkAdmitLimited is a buy refused by the sale's rate: no tokens in hand.
func BenchmarkAdmitLimited(b *testing.B) {
	g := &Guard{opt: Options{Buy: conf.Default().Buy, MaxInflight: 1, Now: time.Now}, flags: NewFlags(time.Hour),
		adm: newAdmission(conf.Default().Admission)}
	const sku = "sku_1001"
	g.setRate(sku, 1000, 100)
	l := (*g.adm.rates.Load())[sku]
	_, _, call := l.Take(time.Now())
	l.Granted(time.Now(), call, 0, 1000, 100, time.Hour)
	r := &BuyRequest{SKU: sku, UID: "u1", Qty: 1}
	b.ReportAllocs()
	for b.Loop() {
		if res, answered := g.local(r, time.Now()); !answered || !errors.Is(res.Err, ErrLimited) {
			b.Fatalf("not limited: %v", res.Err)
		}
	}
}

// BenchmarkSaleMemory is what one open sale costs a proxy that knows it (as a WARM here, or a
// warm event heard, leaves it: its counters, version and flag), in live heap after a GC, per
// sale, for 10,000 sales: the B/sale metric (goal: at most 2 KB).
func BenchmarkSaleMemory(b *testing.B) {
	const sales = 10000
	for b.Loop() {
		g := &Guard{opt: Options{Buy: conf.Default().Buy, MaxInflight: 1, Now: time.Now}, flags: NewFlags(time.Hour),
			adm: newAdmission(conf.Default().Admission)}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range sales {
			sku := "memory_sale_" + strconv.Itoa(i)
			g.countersFor(sku)
			g.versions.Store(sku, "1")
			g.clearFlag(sku)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/sales, "B/sale")
		runtime.KeepAlive(g)
	}
}
