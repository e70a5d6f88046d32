package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/internal/loadtest"
	"seckill-proxy/router"
	"seckill-proxy/sale"
)

// TestLegacyBuyScript: the seeds' buy script, in a copy of the service's own (comments and
// indentation of its own, so another SHA1), through the proxy on the cluster, as go-redis's
// Script runs it (EVALSHA, then EVAL on NOSCRIPT): each call is a SECKILL.BUY answered with
// the script's integers, the seeds' keys are never written, and a script the proxy does not
// recognise on a legacy stock key is refused.
func TestLegacyBuyScript(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Redis.AdminAllow = []string{"script"} })
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("legacy")
	s.sale(t, c, sku, 2)
	copyOf := "-- the stock script, as the service carries it\n" +
		strings.ReplaceAll(router.LegacyBuyScript, "\n", "\n    ") + "  -- done\n"
	script := redis.NewScript(copyOf)
	keys := []string{router.LegacyStockPrefix + sku, "seckill:buyers:" + sku}
	for _, step := range []struct {
		uid  string
		want int64
	}{{"u1", 1}, {"u1", -1}, {"u2", 1}, {"u3", 0}, {"u2", -1}} {
		got, err := script.Run(ctx, c, keys, step.uid, 1).Int64()
		if err != nil || got != step.want {
			t.Fatalf("legacy buy by %s = %d, %v; want %d", step.uid, got, err, step.want)
		}
	}
	sha, err := c.ScriptLoad(ctx, router.LegacyBuyScript).Result()
	if err != nil || sha != redis.NewScript(router.LegacyBuyScript).Hash() {
		t.Fatalf("SCRIPT LOAD = %q, %v; want the body's SHA1", sha, err)
	}
	if got, err := c.EvalSha(ctx, sha, keys, "u4", 1).Int64(); err != nil || got != 0 {
		t.Fatalf("EVALSHA after SCRIPT LOAD = %d, %v; want 0 (sold out)", got, err)
	}
	// After SCRIPT FLUSH the proxy still knows the copies it has seen: no NOSCRIPT.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	if got, err := c.EvalSha(ctx, sha, keys, "u1", 1).Int64(); err != nil || got != -1 {
		t.Fatalf("EVALSHA after SCRIPT FLUSH = %d, %v; want -1 (u1 bought)", got, err)
	}
	if n, err := s.rc.HLen(ctx, sale.KeysFor(sku).Buyers).Result(); err != nil || n != 2 {
		t.Fatalf("the sale's buyers = %d, %v; want 2", n, err)
	}
	for _, k := range keys {
		if n, err := s.rc.Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Fatalf("%s exists in Redis (%d, %v): the seeds' keys must not be written", k, n, err)
		}
	}
	err = c.Eval(ctx, "return redis.call('SET', KEYS[1], 2050)", []string{router.LegacyStockPrefix + sku}).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "does not recognise") {
		t.Fatalf("an unknown script on a legacy key: %v, want NOPERM", err)
	}
}

// TestLegacyDeductScript: the seeds' variant without a buyer, turned on, on a standalone
// upstream: each call buys as a new buyer; -1 for a SKU with no sale.
func TestLegacyDeductScript(t *testing.T) {
	s := startStandalone(t, func(c *conf.Config) { c.Buy.LegacyUIDLess = true })
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("deduct")
	s.sale(t, c, sku, 2)
	script := redis.NewScript(router.LegacyDeductScript)
	for i, want := range []int64{1, 1, 0} {
		got, err := script.Run(ctx, c, []string{router.LegacyStockPrefix + sku}, 1).Int64()
		if err != nil || got != want {
			t.Fatalf("deduct %d = %d, %v; want %d", i, got, err, want)
		}
	}
	if got, err := script.Run(ctx, c, []string{router.LegacyStockPrefix + newSKU("nosale")}, 1).Int64(); err != nil || got != -1 {
		t.Fatalf("deduct of a SKU with no sale = %d, %v; want -1", got, err)
	}
}

// TestLegacyKeys: the seeds' reads of a sale are answered from the sale, and the operator's
// mid-sale SET of the stock (2,050 for 2,000 phones) is refused: the sale still sells exactly
// its stock.
func TestLegacyKeys(t *testing.T) { eachUpstream(t, testLegacyKeys) }

func testLegacyKeys(t *testing.T, s *stack) {
	c := s.client(t, 4)
	ctx := context.Background()
	sku := newSKU("legacykeys")
	const units = 20
	s.sale(t, c, sku, units)
	stockKey, soldOutKey, buyersKey := router.LegacyStockPrefix+sku, "seckill:soldout:"+sku, "seckill:buyers:"+sku
	if got, err := c.Get(ctx, stockKey).Result(); err != nil || got != "20" {
		t.Fatalf("GET %s = %q, %v; want 20", stockKey, got, err)
	}
	if got, err := c.Get(ctx, soldOutKey).Result(); err != nil || got != "0" {
		t.Fatalf("GET %s = %q, %v; want 0", soldOutKey, got, err)
	}
	script := redis.NewScript(router.LegacyBuyScript)
	keys := []string{stockKey, buyersKey}
	sold := 0
	for i := range 2 * units {
		if i == units/2 {
			err := c.Set(ctx, stockKey, 2050, 0).Err()
			if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "SECKILL.WARM") {
				t.Fatalf("SET of the stock mid-sale: %v, want NOPERM naming SECKILL.WARM", err)
			}
			if err := c.IncrBy(ctx, stockKey, 50).Err(); err == nil {
				t.Fatal("INCRBY of the stock mid-sale was not refused")
			}
		}
		got, err := script.Run(ctx, c, keys, "b"+string(rune('a'+i%26))+string(rune('a'+i/26)), 1).Int64()
		if err != nil {
			t.Fatal(err)
		}
		if got == 1 {
			sold++
		}
	}
	if sold != units {
		t.Fatalf("%d legacy buys succeeded for %d units", sold, units)
	}
	if got, err := c.Get(ctx, stockKey).Result(); err != nil || got != "0" {
		t.Fatalf("GET %s after the sale = %q, %v; want 0", stockKey, got, err)
	}
	if got, err := c.Get(ctx, soldOutKey).Result(); err != nil || got != "1" {
		t.Fatalf("GET %s after the sale = %q, %v; want 1", soldOutKey, got, err)
	}
	if ok, err := c.HExists(ctx, buyersKey, "baa").Result(); err != nil || !ok {
		t.Fatalf("HEXISTS of a buyer = %v, %v", ok, err)
	}
	if ok, err := c.HExists(ctx, "seckill:users:"+sku, "nobody").Result(); err != nil || ok {
		t.Fatalf("HEXISTS of a non-buyer = %v, %v", ok, err)
	}
	if got, err := c.HGet(ctx, buyersKey, "baa").Result(); err != nil || got != "1" {
		t.Fatalf("HGET of a buyer = %q, %v; want 1", got, err)
	}
	if err := c.Get(ctx, router.LegacyStockPrefix+newSKU("never")).Err(); err != redis.Nil {
		t.Fatalf("GET of a SKU with no sale = %v, want nil", err)
	}
	if left, err := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Int(); err != nil || left != 0 {
		t.Fatalf("the sale's stock = %d, %v; want 0", left, err)
	}
}

// TestLegacySeedsSale: the seeds' own client code (loadtest.LegacyBuyer: a local sold-out map,
// then EVALSHA of the seeds' stock script on the seeds' keys), unchanged, through the proxy on
// the cluster, Kafka and the sink, for the seeds' sale: exactly 2,000 replies of 1 and 78,000
// of 0, 2,000 confirmed orders in MySQL, and Redis reconciled with MySQL.
func TestLegacySeedsSale(t *testing.T) {
	const units, buyers, conns = 2000, 80000, 200
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, conns)
	sku := newSKU("legacyseeds")
	s.sale(t, c, sku, units)
	buy, _ := loadtest.LegacyBuyer(c, sku, 1)
	ctx := context.Background()
	var ones, zeros, others atomic.Int64
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			for i := w; i < buyers; i += conns {
				_, err := buy(ctx, "u"+strconv.Itoa(i))
				switch loadtest.Kind(err) {
				case loadtest.ReplyOrder:
					ones.Add(1)
				case loadtest.ReplySoldOut:
					zeros.Add(1)
				default:
					others.Add(1)
					t.Errorf("buyer %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	if ones.Load() != units || zeros.Load() != buyers-units || others.Load() != 0 {
		t.Fatalf("replies: %d of 1, %d of 0, %d others; want %d and %d", ones.Load(), zeros.Load(), others.Load(), units, buyers-units)
	}
	k := sale.KeysFor(sku)
	if stock, _ := s.rc.Get(ctx, k.Stock).Int(); stock != 0 {
		t.Errorf("the sale's stock = %d, want 0", stock)
	}
	if n := s.rc.HLen(ctx, k.Buyers).Val(); n != units {
		t.Errorf("buyers hash holds %d, want %d", n, units)
	}
	s.waitConfirmed(t, sku, units, 60*time.Second)
	if st, stock := s.mysqlOrders(t, sku); len(st) != 1 || stock != 0 {
		t.Fatalf("MySQL orders %v, stock %d; want only %d confirmed and stock 0", st, stock, units)
	}
	waitCheckOK(t, c, sku, 30*time.Second)
}

// TestLegacyConfiguredScript: a service's own stock script, configured in buy.legacy with its
// key pattern, arguments and replies, runs as a buy.
func TestLegacyConfiguredScript(t *testing.T) {
	const body = `-- our own
local left = tonumber(redis.call('GET', KEYS[1]) or '0')
if left < tonumber(ARGV[2]) then return 'none' end
redis.call('DECRBY', KEYS[1], ARGV[2])
return 'ok'`
	s := start(t, func(c *conf.Config) {
		c.Buy.Legacy = []conf.LegacyScript{{Name: "shop", Body: body, StockKey: "shop:{sku}:left", Keys: 1, UIDArg: 1, QtyArg: 2,
			Replies: conf.LegacyReplies{Success: 7, SoldOut: 8, Duplicate: 9, NoSale: 10}}}
	})
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("shop")
	s.sale(t, c, sku, 1)
	script := redis.NewScript(body)
	key := []string{"shop:" + sku + ":left"}
	for _, step := range []struct {
		uid  string
		want int64
	}{{"a", 7}, {"a", 9}, {"b", 8}} {
		if got, err := script.Run(ctx, c, key, step.uid, 1).Int64(); err != nil || got != step.want {
			t.Fatalf("%s: %d, %v; want %d", step.uid, got, err, step.want)
		}
	}
	if got, err := script.Run(ctx, c, []string{"shop:" + newSKU("none") + ":left"}, "a", 1).Int64(); err != nil || got != 10 {
		t.Fatalf("no sale: %d, %v; want 10", got, err)
	}
}
