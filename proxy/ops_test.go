package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/sale"
	"seckill-proxy/sink"
)

// infoMap turns a flat field/value reply into a map of strings.
// infoMap reads a field/value reply: a map in RESP3 (go-redis's default), a flat array in
// RESP2.
func infoMap(t *testing.T, v any) map[string]string {
	t.Helper()
	m := map[string]string{}
	switch v := v.(type) {
	case map[any]any:
		for k, x := range v {
			m[fmt.Sprint(k)] = fmt.Sprint(x)
		}
	case []any:
		if len(v)%2 != 0 {
			t.Fatalf("odd field/value reply: %v", v)
		}
		for i := 0; i < len(v); i += 2 {
			m[fmt.Sprint(v[i])] = fmt.Sprint(v[i+1])
		}
	default:
		t.Fatalf("not a field/value reply: %T %v", v, v)
	}
	return m
}

func TestSaleInfo(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("info")
	s.sale(t, c, sku, 3, "LIMIT", 2)
	if err := c.Do(ctx, "seckill.buy", sku, "u1", 2).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := c.Do(ctx, "seckill.info", sku).Result()
	if err != nil {
		t.Fatal(err)
	}
	m := infoMap(t, v)
	want := map[string]string{"sku": sku, "state": "open", "version": "1", "limit": "2", "initial_stock": "3",
		"remaining_stock": "1", "sold": "2", "buyers": "1", "local_flag": "none", "local_successes": "1"}
	for k, w := range want {
		if m[k] != w {
			t.Errorf("SECKILL.INFO %s = %q, want %q", k, m[k], w)
		}
	}
	v, err = c.Do(ctx, "seckill.info").Result()
	if err != nil {
		t.Fatal(err)
	}
	if sales := infoMap(t, v)["sales"]; !strings.Contains(sales, sku) {
		t.Fatalf("SECKILL.INFO without a sku: %v", v)
	}
	if err := c.Do(ctx, "seckill.info", newSKU("never")).Err(); code(err) != "ERR" || !contains(err, "never warmed") {
		t.Fatalf("INFO of an unknown sku: %v", err)
	}
	info, err := c.Info(ctx, "seckill").Result()
	if err != nil || !strings.Contains(info, "# Seckill\r\n") || !strings.Contains(info, "\r\nbuys:1\r\nbuy_successes:1\r\n") || !strings.Contains(info, "kafka_published:") {
		t.Fatalf("INFO seckill: %q %v", info, err)
	}
}

func TestCloseSale(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("close")
	s.sale(t, c, sku, 5)
	if err := c.Do(ctx, "seckill.close", newSKU("never")).Err(); code(err) != "ERR" {
		t.Fatalf("CLOSE of an unknown sku: %v", err)
	}
	for i := range 2 { // CLOSE is idempotent
		v, err := c.Do(ctx, "seckill.close", sku).Result()
		if err != nil {
			t.Fatal(err)
		}
		if was := map[int]string{0: "open", 1: "closed"}[i]; infoMap(t, v)["was"] != was {
			t.Fatalf("CLOSE #%d: %v, want was=%s", i+1, v, was)
		}
	}
	if err := c.Do(ctx, "seckill.buy", sku, "u1").Err(); err == nil || err.Error() != "CLOSED closed" {
		t.Fatalf("buy after CLOSE: %v", err)
	}
	var status string
	if err := s.db.QueryRow(`SELECT status FROM seckill_items WHERE sku = ?`, sku).Scan(&status); err != nil || status != "closed" {
		t.Fatalf("MySQL status %q (%v), want closed", status, err)
	}
	// A closed sale can be warmed again (a new sale).
	if err := c.Do(ctx, "seckill.warm", sku).Err(); err != nil {
		t.Fatalf("WARM after CLOSE: %v", err)
	}
	if err := c.Do(ctx, "seckill.buy", sku, "u1").Err(); err != nil {
		t.Fatalf("buy after the re-warm: %v", err)
	}
}

func TestRelease(t *testing.T) {
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("release")
	s.sale(t, c, sku, 2, "LIMIT", 2)
	id, err := c.Do(ctx, "seckill.buy", sku, "u1", 2).Text()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the order confirmed", func() bool {
		st, _ := c.Do(ctx, "seckill.status", sku, "u1").Text()
		return st == "confirmed "+id
	})
	if err := c.Do(ctx, "seckill.release", sku, "nobody").Err(); code(err) != "ERR" {
		t.Fatalf("RELEASE of a non-buyer: %v", err)
	}
	v, err := c.Do(ctx, "seckill.release", sku, "u1").Result()
	if err != nil {
		t.Fatal(err)
	}
	if m := infoMap(t, v); m["order"] != id || m["released"] != "2" || m["stock"] != "2" {
		t.Fatalf("RELEASE = %v", v)
	}
	v, err = c.Do(ctx, "seckill.release", sku, "u1").Result()
	if err != nil || infoMap(t, v)["released"] != "0" {
		t.Fatalf("second RELEASE = %v, %v; want nothing released", v, err)
	}
	if left, _ := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Int(); left != 2 {
		t.Fatalf("Redis stock %d after two releases, want 2 (never above the initial stock)", left)
	}
	eventually(t, 30*time.Second, "the MySQL order cancelled and its stock back", func() bool {
		st, stock := s.mysqlOrders(t, sku)
		return st[sink.StatusCancelled] == 1 && stock == 2
	})
	if st, _ := c.Do(ctx, "seckill.status", sku, "u1").Text(); st != "cancelled "+id {
		t.Fatalf("STATUS after RELEASE = %q", st)
	}
	// By default a released buyer may not buy again in the same sale.
	if err := c.Do(ctx, "seckill.buy", sku, "u1").Err(); err == nil || err.Error() != "DUPLICATE "+id {
		t.Fatalf("rebuy after release: %v", err)
	}
	if err := c.Do(ctx, "seckill.buy", sku, "u2", 2).Err(); err != nil {
		t.Fatalf("the released units are for sale again: %v", err)
	}
	waitCheckOK(t, c, sku, 30*time.Second)
}

func TestRebuyAfterRelease(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Buy.RebuyAfterRelease = true })
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("rebuy")
	s.sale(t, c, sku, 1)
	first, err := c.Do(ctx, "seckill.buy", sku, "u1").Text()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "seckill.release", sku, "u1").Err(); err != nil {
		t.Fatal(err)
	}
	second, err := c.Do(ctx, "seckill.buy", sku, "u1").Text()
	if err != nil || second == first {
		t.Fatalf("rebuy: %q, %v; want a new order", second, err)
	}
}

// TestCheck: after a full sale and drain CHECK says OK; a hand-made difference is reported
// with both numbers.
func TestCheck(t *testing.T) {
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, 20)
	ctx := context.Background()
	sku := newSKU("check")
	s.sale(t, c, sku, 100)
	buyAll(t, c, sku, "u", 150, 20)
	s.waitConfirmed(t, sku, 100, 30*time.Second)
	s.waitOutboxEmpty(t, sku, 30*time.Second)
	// The sink writes the outcomes to Redis just after its commit: CHECK agrees once it has.
	waitCheckOK(t, c, sku, 10*time.Second)
	if err := s.rc.Set(ctx, sale.KeysFor(sku).Stock, 7, 0).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := c.Do(ctx, "seckill.check", sku).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || v[0] != "remaining stock: redis 7 + 0 in flight = 7, mysql 0" {
		t.Fatalf("CHECK = %q", v)
	}
	buyer := s.rc.HRandField(ctx, sale.KeysFor(sku).Buyers, 1).Val()
	if err := s.rc.HDel(ctx, sale.KeysFor(sku).Buyers, buyer...).Err(); err != nil {
		t.Fatal(err)
	}
	v, err = c.Do(ctx, "seckill.check", sku).StringSlice()
	if err != nil || len(v) != 2 || v[0] != "remaining stock: redis 7 + 0 in flight = 7, mysql 0" ||
		v[1] != "buyers: redis 99 (0 in flight, 0 rejected) = 99 settled, mysql 100 confirmed" {
		t.Fatalf("CHECK = %q, %v", v, err)
	}
	if err := c.Do(ctx, "seckill.check", newSKU("never")).Err(); code(err) != "ERR" {
		t.Fatalf("CHECK of an unknown sku: %v", err)
	}
}

// TestPermissions: an app user may buy and read, not run the admin commands.
func TestPermissions(t *testing.T) {
	s := start(t, func(c *conf.Config) {
		c.Users = []conf.User{{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}, {Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}}
	})
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: s.addr, Username: "ops", Password: "ops-pw"})
	defer admin.Close()
	app := redis.NewClient(&redis.Options{Addr: s.addr, Username: "shop", Password: "shop-pw"})
	defer app.Close()
	sku := newSKU("perm")
	s.sale(t, admin, sku, 5)
	if err := app.Do(ctx, "seckill.buy", sku, "u1").Err(); err != nil {
		t.Fatalf("app BUY: %v", err)
	}
	if err := app.Do(ctx, "seckill.status", sku, "u1").Err(); err != nil {
		t.Fatalf("app STATUS: %v", err)
	}
	for _, cmd := range [][]any{{"seckill.warm", sku, "FORCE"}, {"seckill.close", sku}, {"seckill.release", sku, "u1"}, {"seckill.check", sku}} {
		if err := app.Do(ctx, cmd...).Err(); code(err) != "NOPERM" {
			t.Errorf("app %v: %v, want NOPERM", cmd[0], err)
		}
	}
	if err := admin.Do(ctx, "seckill.close", sku).Err(); err != nil {
		t.Fatalf("admin CLOSE: %v", err)
	}
	anon := redis.NewClient(&redis.Options{Addr: s.addr})
	defer anon.Close()
	if err := anon.Do(ctx, "seckill.buy", sku, "u2").Err(); code(err) != "NOAUTH" {
		t.Fatalf("anonymous BUY: %v", err)
	}
}

// TestStockKeyIsProtected: the seeds' second oversell came from a hand-typed SET.
func TestStockKeyIsProtected(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("protect")
	s.sale(t, c, sku, 2000)
	if err := c.Set(ctx, sale.KeysFor(sku).Stock, 2050, 0).Err(); code(err) != "NOPERM" {
		t.Fatalf("SET on the stock key: %v, want NOPERM", err)
	}
	if left, _ := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Int(); left != 2000 {
		t.Fatalf("stock %d, want 2000", left)
	}
}

// TestTwoProxies: a sellout through A flags B too; a release through A lets B sell again
// within a second.
func TestTwoProxies(t *testing.T) {
	cfg := newConfig(t, func(c *conf.Config) { c.Buy.SoldOutReprobe = time.Hour })
	a := startProxy(t, cfg, true)
	b := startProxy(t, cfg, true)
	ca, cb := a.client(t, 1), b.client(t, 1)
	ctx := context.Background()
	sku := newSKU("two")
	a.sale(t, ca, sku, 1)
	if err := ca.Do(ctx, "seckill.buy", sku, "u1").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "B hears of the sellout", func() bool {
		flagged, _, _ := b.g.Flags().Get(sku, time.Now())
		return flagged
	})
	scripts := b.g.Stats().Scripts
	if err := cb.Do(ctx, "seckill.buy", sku, "u2").Err(); code(err) != "SOLDOUT" || b.g.Stats().Scripts != scripts {
		t.Fatalf("B after the sellout: %v, %d scripts; want SOLDOUT with none", err, b.g.Stats().Scripts-scripts)
	}
	if err := ca.Do(ctx, "seckill.release", sku, "u1").Err(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	eventually(t, time.Second, "a buy through B succeeds", func() bool { return cb.Do(ctx, "seckill.buy", sku, "u2").Err() == nil })
	t.Logf("B sold again %v after the release", time.Since(released).Round(time.Millisecond))

	if err := ca.Do(ctx, "seckill.close", sku).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "B refuses the closed sale locally", func() bool {
		_, isClosed, _ := b.g.Flags().Get(sku, time.Now())
		return isClosed != ""
	})
}

// TestOpsArgumentsOverTheWire: wrong arity and bad arguments of the sale commands, through
// a real client.
func TestOpsArgumentsOverTheWire(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	ctx := context.Background()
	tests := []struct {
		args []any
		want string
	}{
		{[]any{"seckill.close"}, "ERR wrong number of arguments for 'seckill.close' command"},
		{[]any{"seckill.close", "a", "b"}, "ERR wrong number of arguments for 'seckill.close' command"},
		{[]any{"seckill.release", "sku"}, "ERR wrong number of arguments for 'seckill.release' command"},
		{[]any{"seckill.release", "sku", "u 1"}, `ERR uid must be 1-64 characters of [A-Za-z0-9_.:-], got "u 1"`},
		{[]any{"seckill.check"}, "ERR wrong number of arguments for 'seckill.check' command"},
		{[]any{"seckill.check", "sku*"}, `ERR sku must be 1-64 characters of [A-Za-z0-9_.:-], got "sku*"`},
		{[]any{"seckill.info", "a", "b"}, "ERR wrong number of arguments for 'seckill.info' command"},
		{[]any{"seckill.warm", "sku", "LIMIT", "0"}, "ERR LIMIT must be a positive integer, got \"0\""},
		{[]any{"seckill.release", "never_warmed_sku", "u1"}, "ERR u1 has no order in sale never_warmed_sku"},
		{[]any{"seckill.close", "never_warmed_sku"}, "ERR no sale never_warmed_sku: it was never warmed"},
		{[]any{"seckill.check", "never_warmed_sku"}, "ERR no sale never_warmed_sku: it was never warmed"},
	}
	for _, tt := range tests {
		if err := c.Do(ctx, tt.args...).Err(); err == nil || err.Error() != tt.want {
			t.Errorf("%v: %v, want %s", tt.args, err, tt.want)
		}
	}
}
