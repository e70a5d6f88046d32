package proxy_test

import (
	"context"
	"strconv"
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

// pipelineStatuses sends SECKILL.STATUS of each SKU (with WAIT wait, if not 0) in one
// pipeline, and counts the answers by their code word ("none" for a status of none).
func pipelineStatuses(t *testing.T, c *redis.Client, skus []string, wait string) map[string]int {
	t.Helper()
	ctx := context.Background()
	cmds, _ := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sku := range skus {
			if wait != "" {
				p.Do(ctx, "seckill.status", sku, "u1", "wait", wait)
			} else {
				p.Do(ctx, "seckill.status", sku, "u1")
			}
		}
		return nil
	})
	got := map[string]int{}
	for _, cmd := range cmds {
		if cmd.Err() != nil {
			got[code(cmd.Err())]++
			continue
		}
		got[cmd.(*redis.Cmd).Val().(string)]++
	}
	return got
}

// TestUnknownSKUStatusCostBounded: SECKILL.STATUS of SKUs with no sale costs Redis what a
// BUY of them does: at most admission.unknown_sku_rate reads a second for SKUs never seen, and
// none for a SKU found to have no sale; a WAIT or an outcome channel on one starts no outcome
// reader (whose blocking read holds a pool connection). Before, one connection made 4 Redis
// calls per STATUS at any rate, and each WAIT started a reader.
func TestUnknownSKUStatusCostBounded(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Admission.UnknownSKURate, c.Buy.SoldOutReprobe = 100, 30*time.Second })
	c := s.client(t, 1)
	junk := newSKU("sjunk")
	repeat := make([]string, 200)
	for i := range repeat {
		repeat[i] = junk
	}
	start, first := time.Now(), s.field("status_reads")
	if got := pipelineStatuses(t, c, repeat, ""); got["none"] == 0 || got["none"]+got["LIMITED"] != 200 {
		t.Fatalf("200 STATUS of a SKU with no sale: %v, want none (and LIMITED past the rate) only", got)
	}
	before := s.field("status_reads")
	if got := pipelineStatuses(t, c, repeat, "5000"); got["none"] != 200 {
		t.Fatalf("200 STATUS ... WAIT of it: %v, want 200 none at once", got)
	}
	if n := s.field("status_reads") - before; n != 0 {
		t.Fatalf("200 STATUS of a SKU known to have no sale made %d reads, want 0", n)
	}
	distinct := make([]string, 1000)
	for i := range distinct {
		distinct[i] = newSKU("sjunk")
	}
	got := pipelineStatuses(t, c, distinct, "5000")
	made, elapsed := s.field("status_reads")-first, time.Since(start)
	if bound := 100 + int64(elapsed.Seconds()*100) + 1; made > bound {
		t.Fatalf("1,400 STATUS of made-up SKUs in %v made %d reads, want at most %d (unknown_sku_rate 100)", elapsed, made, bound)
	}
	if got["none"]+got["LIMITED"] != len(distinct) || got["LIMITED"] == 0 {
		t.Fatalf("1,000 made-up SKUs: %v, want none or LIMITED only, some LIMITED", got)
	}
	if n := s.field("status_outcome_readers"); n != 0 {
		t.Fatalf("%d outcome readers for made-up SKUs' waits, want 0", n)
	}
	// An outcome channel of a made-up SKU: none, at no cost. (The 1,000 made-up SKUs may have
	// taken junk's place in the direct-mapped no-sale table: a STATUS teaches it again, once
	// the unknown-SKU rate has room.)
	eventually(t, 5*time.Second, "a STATUS of junk answered none", func() bool {
		return pipelineStatuses(t, c, []string{junk}, "")["none"] == 1
	})
	sub := dialRaw(t, s.addr)
	before = s.field("status_reads")
	if got, want := sub.do(t, "SUBSCRIBE", "seckill:outcome:"+junk+"/u1"), "subscribe"; !strings.Contains(got, want) {
		t.Fatalf("SUBSCRIBE = %q", got)
	}
	if _, p := messageFields(readMessage(t, sub)); p != "none" {
		t.Fatalf("the channel's first message %q, want none", p)
	}
	if n := s.field("status_reads") - before; n != 0 {
		t.Fatalf("an outcome channel of a SKU known to have no sale made %d reads", n)
	}
	// A real sale is not limited: its first STATUS teaches the proxy it exists.
	sku := newSKU("sreal")
	s.sale(t, c, sku, 5)
	for i := range 300 {
		if err := c.Do(context.Background(), "seckill.status", sku, "u"+strconv.Itoa(i)).Err(); err != nil {
			t.Fatalf("STATUS %d of a warmed sale: %v", i, err)
		}
	}
}
