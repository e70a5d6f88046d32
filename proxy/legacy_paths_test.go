package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/router"
	"seckill-proxy/sale"
)

// eachProto runs f with a go-redis client of s speaking RESP2, then RESP3.
func eachProto(t *testing.T, s *stack, f func(t *testing.T, c *redis.Client)) {
	for _, proto := range []int{2, 3} {
		t.Run("resp"+string(rune('0'+proto)), func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: s.addr, Protocol: proto, PoolSize: 1})
			t.Cleanup(func() { _ = c.Close() })
			f(t, c)
		})
	}
}

// TestLegacyScriptsAsCarried: the seeds' buy, verbatim as a service carries it, runs as a buy
// through EVALSHA after SCRIPT LOAD and through go-redis's Script; a loaded script that the
// proxy does not recognise gets the same refusal through EVALSHA as through EVAL, never
// NOSCRIPT.
func TestLegacyScriptsAsCarried(t *testing.T) {
	s := start(t, nil)
	eachProto(t, s, func(t *testing.T, c *redis.Client) {
		ctx := context.Background()
		sku := newSKU("carried")
		s.sale(t, c, sku, 2)
		keys := []string{router.LegacyStockPrefix + sku, "seckill:buyers:" + sku}
		sha, err := c.ScriptLoad(ctx, testenv.SeedsBuyAsCarried).Result()
		if err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
		if got, err := c.EvalSha(ctx, sha, keys, "u1", 1).Int64(); err != nil || got != 1 {
			t.Fatalf("EVALSHA of the loaded script = %d, %v; want 1", got, err)
		}
		script := redis.NewScript(testenv.SeedsBuyAsCarried)
		for _, step := range []struct {
			uid  string
			want int64
		}{{"u1", -1}, {"u2", 1}, {"u3", 0}} {
			if got, err := script.Run(ctx, c, keys, step.uid, 1).Int64(); err != nil || got != step.want {
				t.Fatalf("%s: %d, %v; want %d", step.uid, got, err, step.want)
			}
		}
		if n := s.rc.HLen(ctx, sale.KeysFor(sku).Buyers).Val(); n != 2 {
			t.Fatalf("the sale has %d buyers, want 2", n)
		}
		mine := "return redis.call('GET', KEYS[1]) -- " + sku
		sha, err = c.ScriptLoad(ctx, mine).Result()
		if err != nil {
			t.Fatalf("SCRIPT LOAD of a script of the client's own: %v", err)
		}
		for name, err := range map[string]error{
			"EVALSHA": c.EvalSha(ctx, sha, keys[:1]).Err(),
			"EVAL":    c.Eval(ctx, mine, keys[:1]).Err(),
		} {
			if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "does not recognise") {
				t.Errorf("%s of an unrecognised script on a legacy key: %v, want NOPERM ... does not recognise", name, err)
			}
		}
	})
}

// TestLegacyDeductOffByDefault: the seeds' deduct names no buyer, so with the defaults it is
// refused with the setting's name, and sells nothing.
func TestLegacyDeductOffByDefault(t *testing.T) {
	s := start(t, nil)
	eachProto(t, s, func(t *testing.T, c *redis.Client) {
		ctx := context.Background()
		sku := newSKU("deductoff")
		s.sale(t, c, sku, 5, "LIMIT", "1")
		for _, body := range []string{testenv.SeedsDeductAsCarried, router.LegacyDeductScript} {
			err := redis.NewScript(body).Run(ctx, c, []string{router.LegacyStockPrefix + sku}, 1).Err()
			if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "buy.legacy_uidless") {
				t.Fatalf("the deduct script with the defaults: %v, want NOPERM naming buy.legacy_uidless", err)
			}
		}
		if left := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Val(); left != "5" {
			t.Fatalf("stock %s after refused deducts, want 5", left)
		}
	})
}

// TestLegacyDeductOnIsBounded: turned on, the deduct buys as a new buyer each call, but the
// deny list applies to the logged-in user and a connection has a cap on such calls.
func TestLegacyDeductOnIsBounded(t *testing.T) {
	user := newSKU("shop") // the deny list is the cluster's: a name of the test's own
	s := start(t, func(c *conf.Config) {
		c.Buy.LegacyUIDLess, c.Buy.LegacyUIDLessPerConn = true, 3
		c.Users = []conf.User{{Name: user, Password: "shop-pw", Role: conf.RoleApp}, {Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}}
	})
	ctx := context.Background()
	ops := redis.NewClient(&redis.Options{Addr: s.addr, Username: "ops", Password: "ops-pw"})
	t.Cleanup(func() { _ = ops.Close() })
	sku := newSKU("deducton")
	s.sale(t, ops, sku, 50, "LIMIT", "1")
	shop := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: s.addr, Username: user, Password: "shop-pw", PoolSize: 1})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	script := redis.NewScript(testenv.SeedsDeductAsCarried)
	key := []string{router.LegacyStockPrefix + sku}
	c := shop()
	for i := range 3 {
		if got, err := script.Run(ctx, c, key, 1).Int64(); err != nil || got != 1 {
			t.Fatalf("deduct %d = %d, %v; want 1", i, got, err)
		}
	}
	if err := script.Run(ctx, c, key, 1).Err(); err == nil || !strings.HasPrefix(err.Error(), "LIMITED buyer") {
		t.Fatalf("the connection's 4th deduct: %v, want LIMITED buyer", err)
	}
	if err := ops.Do(ctx, "seckill.deny", user).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ops.Do(context.Background(), "seckill.allow", user).Err() })
	// A buy of a SKU with no sale sells nothing either way: LIMITED denied once the deny list
	// has reached the proxy, CLOSED before.
	noSale := newSKU("nosale")
	eventually(t, 5*time.Second, "the deny list reaches the proxy", func() bool {
		err := ops.Do(ctx, "seckill.buy", noSale, user).Err()
		return err != nil && strings.HasPrefix(err.Error(), "LIMITED denied")
	})
	if err := script.Run(ctx, shop(), key, 1).Err(); err == nil || !strings.HasPrefix(err.Error(), "LIMITED denied") {
		t.Fatalf("a deduct by the denied user on a new connection: %v, want LIMITED denied", err)
	}
	if left := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Val(); left != "47" {
		t.Fatalf("stock %s, want 47: three deducts, then the cap and the deny list", left)
	}
}

// TestLegacyInMulti: a legacy script, an unrecognised script on a legacy key, or a command on
// the seeds' keys queued inside MULTI fails the transaction (EXECABORT); nothing is sold and
// no raw legacy key is written. redis-py's default pipeline() is such a MULTI.
func TestLegacyInMulti(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Buy.LegacyUIDLess = true })
	eachProto(t, s, func(t *testing.T, c *redis.Client) {
		ctx := context.Background()
		sku := newSKU("multi")
		s.sale(t, c, sku, 10)
		stock := router.LegacyStockPrefix + sku
		for name, queue := range map[string]func(p redis.Pipeliner){
			"the seeds' deduct": func(p redis.Pipeliner) { p.Eval(ctx, router.LegacyDeductScript, []string{stock}, 1) },
			"the seeds' buy": func(p redis.Pipeliner) {
				p.Eval(ctx, testenv.SeedsBuyAsCarried, []string{stock, "seckill:buyers:" + sku}, "u1", 1)
			},
			"an unknown script":  func(p redis.Pipeliner) { p.Eval(ctx, "return redis.call('SET', KEYS[1], 5000)", []string{stock}) },
			"a GET of the stock": func(p redis.Pipeliner) { p.Get(ctx, stock) },
		} {
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, "multi:{"+sku+"}", "x", 0)
				queue(p)
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), "EXECABORT") && !strings.Contains(err.Error(), "NOPERM") {
				t.Errorf("%s inside MULTI: %v, want the transaction refused", name, err)
			}
		}
		if left := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Val(); left != "10" {
			t.Errorf("stock %s after refused transactions, want 10", left)
		}
		for _, k := range []string{stock, "multi:{" + sku + "}"} {
			if n := s.rc.Exists(ctx, k).Val(); n != 0 {
				t.Errorf("%s was written by a refused transaction", k)
			}
		}
	})
}

// TestLegacyKeysRefusedByRedis: the seeds' keys are the sale's, so no command writes them,
// whether the proxy sees the key (MSET) or only Redis does (a script that names no key).
func TestLegacyKeysRefusedByRedis(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("aclkeys")
	s.sale(t, c, sku, 10)
	for _, p := range sale.LegacyPrefixes {
		key := p + sku
		if err := c.MSet(ctx, "x:"+sku, 1, key, 5000).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("MSET of %s: %v, want NOPERM", key, err)
		}
		err := c.Eval(ctx, "return redis.call('SET', '"+key+"', 5000)", nil).Err()
		if err == nil || !strings.Contains(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "can't access") {
			t.Errorf("a keyless script writing %s: %v, want Redis's ACL to refuse it", key, err)
		}
		if n := s.rc.Exists(ctx, key).Val(); n != 0 {
			t.Errorf("%s was written", key)
		}
	}
}

// TestWatchSurvivesHello: WATCH k, another client sets k, HELLO (either protocol), MULTI,
// SET k, EXEC: redis-server aborts the transaction (a null reply), and so must the proxy,
// or the second writer's update is lost.
func TestWatchSurvivesHello(t *testing.T) {
	s := start(t, nil)
	for _, tt := range []struct{ from, to int }{{2, 2}, {2, 3}, {3, 2}, {3, 3}} {
		for name, addr := range map[string]string{"redis-server": testenv.Standalone(t), "proxy": s.addr} {
			ctx := context.Background()
			opt := &redis.Options{Addr: addr, Protocol: tt.from, PoolSize: 1}
			c := redis.NewClient(opt)
			other := redis.NewClient(&redis.Options{Addr: opt.Addr})
			key := "watched:" + newSKU("k")
			conn := c.Conn()
			if err := conn.Do(ctx, "watch", key).Err(); err != nil {
				t.Fatalf("%s: WATCH: %v", name, err)
			}
			if err := other.Set(ctx, key, "theirs", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := conn.Do(ctx, "hello", tt.to).Err(); err != nil {
				t.Fatalf("%s: HELLO %d: %v", name, tt.to, err)
			}
			if err := conn.Do(ctx, "multi").Err(); err != nil {
				t.Fatalf("%s: MULTI: %v", name, err)
			}
			if err := conn.Do(ctx, "set", key, "mine").Err(); err != nil {
				t.Fatalf("%s: SET: %v", name, err)
			}
			err := conn.Do(ctx, "exec").Err()
			if err != redis.Nil {
				t.Errorf("%s, HELLO %d -> %d: EXEC = %v, want a null reply (the watched key changed)", name, tt.from, tt.to, err)
			}
			if v := other.Get(ctx, key).Val(); v != "theirs" {
				t.Errorf("%s, HELLO %d -> %d: the key is %q: the other client's update was lost", name, tt.from, tt.to, v)
			}
			_ = conn.Close()
			_ = c.Close()
			_ = other.Del(ctx, key).Err()
			_ = other.Close()
		}
	}
}

// TestLegacyStockReadsAndEvents: a read of the seeds' stock key other than GET says what the
// proxy answers for it, rather than the write error; an app user may not listen on the
// proxies' own events channel, an admin may.
func TestLegacyStockReadsAndEvents(t *testing.T) {
	s := start(t, func(c *conf.Config) {
		c.Users = []conf.User{{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}, {Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}}
	})
	ctx := context.Background()
	shop := redis.NewClient(&redis.Options{Addr: s.addr, Username: "shop", Password: "shop-pw"})
	ops := redis.NewClient(&redis.Options{Addr: s.addr, Username: "ops", Password: "ops-pw"})
	t.Cleanup(func() { _ = shop.Close(); _ = ops.Close() })
	key := router.LegacyStockPrefix + newSKU("reads")
	for name, err := range map[string]error{"STRLEN": shop.StrLen(ctx, key).Err(), "TYPE": shop.Type(ctx, key).Err()} {
		if err == nil || !strings.Contains(err.Error(), "for GET only") {
			t.Errorf("%s of the seeds' stock key: %v, want the GET-only answer", name, err)
		}
	}
	sub := shop.Subscribe(ctx, sale.EventsChannel)
	if _, err := sub.Receive(ctx); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Errorf("an app user's SUBSCRIBE %s: %v, want NOPERM", sale.EventsChannel, err)
	}
	_ = sub.Close()
	sub = ops.Subscribe(ctx, sale.EventsChannel)
	if _, err := sub.Receive(ctx); err != nil {
		t.Errorf("an admin's SUBSCRIBE %s: %v", sale.EventsChannel, err)
	}
	_ = sub.Close()
}
