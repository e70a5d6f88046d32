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
)

// TestAppScriptsAllowList: an app user may run a script that ends in time bounded by its input
// (internal/luabound), one on redis.app_scripts, and the legacy stock scripts (as buys), so an
// endless script cannot take a master away from the sales on it; an admin may run any. An
// EVALSHA of a SHA1 the proxy never judged gets NOSCRIPT, and a client's EVAL of the text then
// runs (go-redis's Script.Run). Run on a private redis-server: if the policy failed, the
// endless script would freeze it, not the shared cluster.
func TestAppScriptsAllowList(t *testing.T) {
	addr, startRedis := ownRedis(t)
	startRedis()
	allowed := "return 1 -- allowed"
	s := startOn(t, addr, func(c *conf.Config) {
		c.Users = []conf.User{{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}, {Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}}
		c.Redis.AppScripts = []string{redis.NewScript(allowed).Hash()}
	})
	ctx := context.Background()
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = direct.Close() })
	for _, proto := range []int{2, 3} {
		shop := redis.NewClient(&redis.Options{Addr: s.addr, Username: "shop", Password: "shop-pw", Protocol: proto, PoolSize: 1})
		ops := redis.NewClient(&redis.Options{Addr: s.addr, Username: "ops", Password: "ops-pw", Protocol: proto})
		endless := "while true do end"
		refused := func(what string, err error) {
			t.Helper()
			if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "redis.app_scripts") {
				t.Errorf("RESP%d: %s as app: %v, want NOPERM naming redis.app_scripts", proto, what, err)
			}
		}
		refused("EVAL of an endless script", shop.Eval(ctx, endless, nil).Err())
		refused("EVAL of a loop on a value", shop.Eval(ctx, "for i = 1, tonumber(ARGV[1]) do end return 1", nil, "1000000000").Err())
		if err := shop.Eval(ctx, endless, nil).Err(); err == nil || !strings.Contains(err.Error(), redis.NewScript(endless).Hash()) || !strings.Contains(err.Error(), "while loop") {
			t.Errorf("RESP%d: the refusal %v names neither the SHA1 nor the reason", proto, err)
		}
		bounded := redis.NewScript("for i = 1, #ARGV do redis.call('incr', KEYS[1]) end return #ARGV -- " + newSKU("b"))
		if err := shop.EvalSha(ctx, bounded.Hash(), []string{"appscripts:n"}, "a").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			t.Errorf("RESP%d: EVALSHA of a script the proxy never saw: %v, want NOSCRIPT", proto, err)
		}
		if got, err := bounded.Run(ctx, shop, []string{"appscripts:n"}, "a", "b").Int(); err != nil || got != 2 {
			t.Errorf("RESP%d: a bounded script as app (Script.Run): %d, %v", proto, got, err)
		}
		if got, err := shop.EvalSha(ctx, bounded.Hash(), []string{"appscripts:n"}, "a").Int(); err != nil || got != 1 {
			t.Errorf("RESP%d: EVALSHA of the bounded script once judged: %d, %v", proto, got, err)
		}
		refused("EVAL_RO of an endless script", shop.EvalRO(ctx, endless, nil).Err())
		refused("SCRIPT LOAD of an endless script", shop.ScriptLoad(ctx, endless).Err())
		sha, err := ops.ScriptLoad(ctx, endless).Result()
		if err != nil {
			t.Fatalf("an admin's SCRIPT LOAD: %v", err)
		}
		refused("EVALSHA of an endless script an admin loaded", shop.EvalSha(ctx, sha, nil).Err())
		refused("FCALL", shop.FCall(ctx, "anything", nil).Err())
		_, err = shop.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Eval(ctx, endless, nil)
			return nil
		})
		if err == nil {
			t.Errorf("RESP%d: an endless script inside MULTI was not refused", proto)
		}
		start := time.Now()
		if err := direct.Ping(ctx).Err(); err != nil || time.Since(start) > time.Second {
			t.Fatalf("the server after the refused scripts: %v in %v; it must still answer", err, time.Since(start))
		}
		if got, err := shop.Eval(ctx, allowed, nil).Int(); err != nil || got != 1 {
			t.Errorf("RESP%d: an allowed script: %d, %v", proto, got, err)
		}
		if got, err := ops.Eval(ctx, "return 2", nil).Int(); err != nil || got != 2 {
			t.Errorf("RESP%d: an admin's script: %d, %v", proto, got, err)
		}
		// A legacy service's own script still runs, as a buy.
		sku := newSKU("appscripts")
		s.sale(t, ops, sku, 1)
		buySHA, err := shop.ScriptLoad(ctx, testenv.SeedsBuyAsCarried).Result()
		if err != nil {
			t.Fatalf("RESP%d: SCRIPT LOAD of the seeds' buy as app: %v", proto, err)
		}
		if got, err := shop.EvalSha(ctx, buySHA, []string{router.LegacyStockPrefix + sku, "seckill:buyers:" + sku}, "u1", 1).Int(); err != nil || got != 1 {
			t.Errorf("RESP%d: the seeds' buy as app: %d, %v; want 1", proto, got, err)
		}
		_ = shop.Close()
		_ = ops.Close()
	}
}
