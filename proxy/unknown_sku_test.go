package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
)

// pipelineBuys sends one pipeline of SECKILL.BUY, one per sku, and counts the replies by code.
func pipelineBuys(t *testing.T, c *redis.Client, skus []string) map[string]int {
	t.Helper()
	ctx := context.Background()
	cmds, _ := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sku := range skus {
			p.Do(ctx, "seckill.buy", sku, "u1")
		}
		return nil
	})
	got := map[string]int{}
	for _, cmd := range cmds {
		got[code(cmd.Err())]++
	}
	return got
}

// TestUnknownSKUsCostBounded: buys of SKUs with no sale, pipelined, cost the masters at most
// one script call per SKU per buy.sold_out_reprobe, and at most admission.unknown_sku_rate a
// second for SKUs never seen; a WARM (here, or through another proxy) ends the local answer.
func TestUnknownSKUsCostBounded(t *testing.T) {
	cfg := newConfig(t, func(c *conf.Config) {
		// A re-probe far longer than the wait below: only the warm event can end b's answer.
		c.Admission.UnknownSKURate, c.Buy.SoldOutReprobe = 100, 30*time.Second
	})
	a, b := startProxy(t, cfg, true), startProxy(t, cfg, true)
	ca, cb := a.client(t, 1), b.client(t, 1)
	junk := newSKU("junk")
	repeat := make([]string, 200)
	for i := range repeat {
		repeat[i] = junk
	}
	// In the first pipeline nothing is known yet: its buys spend the rate, and those past it
	// are LIMITED; none sells.
	// The buys a master without the script (one promoted by an earlier test) answered
	// NOSCRIPT are sent again as EVAL: a cost of its empty script cache, not of admission.
	calls := func() int64 { st := b.g.Stats(); return st.Scripts - st.NoScript }
	start, first := time.Now(), calls()
	if got := pipelineBuys(t, cb, repeat); got["CLOSED"] == 0 || got["CLOSED"]+got["LIMITED"] != 200 {
		t.Fatalf("200 buys of a SKU with no sale: %v, want CLOSED (and LIMITED past the rate) only", got)
	}
	before := calls()
	if got := pipelineBuys(t, cb, repeat); got["CLOSED"] != 200 {
		t.Fatalf("200 more: %v, want 200 CLOSED", got)
	}
	if n := calls() - before; n != 0 {
		t.Fatalf("200 more buys of a SKU known to have no sale made %d script calls, want 0", n)
	}

	distinct := make([]string, 1000)
	for i := range distinct {
		distinct[i] = newSKU("junk")
	}
	got := pipelineBuys(t, cb, distinct)
	made, elapsed := calls()-first, time.Since(start)
	if bound := 100 + int64(elapsed.Seconds()*100) + 1; made > bound {
		t.Fatalf("1,400 buys of made-up SKUs in %v made %d script calls (%d more sent again after NOSCRIPT), want at most %d (unknown_sku_rate 100)",
			elapsed, made, b.g.Stats().NoScript, bound)
	}
	t.Logf("%d script calls, %d buys sent again after NOSCRIPT", made, b.g.Stats().NoScript)
	if got["LIMITED"]+got["CLOSED"] != len(distinct) || got["LIMITED"] == 0 {
		t.Fatalf("1,000 made-up SKUs: %v, want CLOSED or LIMITED only, some LIMITED", got)
	}

	// The SKU gets a sale through the other proxy: b's local answer ends with a's event.
	a.sale(t, ca, junk, 5)
	// b learns the sale from a's event and Redis: its buys no longer spend the unknown-SKU
	// rate that the made-up SKUs above have spent.
	eventually(t, 5*time.Second, "a buy through the other proxy after the WARM", func() bool {
		err := cb.Do(context.Background(), "seckill.buy", junk, "u-after").Err()
		if err != nil && strings.HasPrefix(err.Error(), "LIMITED") {
			t.Fatalf("a buy of a warmed sale spent the unknown-SKU rate: %v", err)
		}
		return err == nil
	})
	if err := cb.Do(context.Background(), "seckill.buy", junk, "u-after").Err(); code(err) != "DUPLICATE" {
		t.Fatalf("the buyer who bought after the WARM: %v, want DUPLICATE", err)
	}
}
