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

// TestAppScriptsAllowList: with no loop fuel (redis.app_script_fuel 0), an app user may run a
// script whose cost internal/luabound bounds within its budget, one on redis.app_scripts,
// and the legacy stock scripts (as buys), so an endless script cannot take a master away from
// the sales on it; an admin may run any. An
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
		c.Redis.AppScriptFuel = 0
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

// TestAppScriptsFueled: an app user's script that loops on a value runs rewritten to count its
// steps (redis.app_script_fuel): an endless one stops with a clear error and leaves its master
// answering, one whose loops end below the fuel answers as it would directly, and the client
// never sees the rewrite: EVALSHA of its own SHA1 runs it, SCRIPT LOAD answers its own SHA1,
// SCRIPT EXISTS of it answers 1, Script.Run falls back from NOSCRIPT, MULTI queues it. What no
// count of steps bounds (string.rep of a value), and a script that names the counter, are
// refused. Run on a private redis-server: if the fuel failed, the endless script would freeze
// it, not the shared cluster.
func TestAppScriptsFueled(t *testing.T) {
	const fuel = 35000 // units: some 1,000 steps of one Redis call
	addr, startRedis := ownRedis(t)
	startRedis()
	s := startOn(t, addr, func(c *conf.Config) {
		c.Users = []conf.User{{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}}
		c.Redis.AppScriptFuel = fuel
	})
	ctx := context.Background()
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = direct.Close() })
	for _, proto := range []int{2, 3} {
		shop := redis.NewClient(&redis.Options{Addr: s.addr, Username: "shop", Password: "shop-pw", Protocol: proto, PoolSize: 1})
		tag := newSKU("fuel")
		endless := "while true do redis.call('incr', KEYS[1]) end -- " + tag
		start := time.Now()
		err := shop.Eval(ctx, endless, []string{"fuel:n:" + tag}).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR script stopped by seckill-proxy after 35000 units") {
			t.Fatalf("RESP%d: an endless script as app: %v, want it stopped by its fuel", proto, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("RESP%d: the endless script took %v", proto, d)
		}
		// each step pays for its Redis call (32 units) and its statements, not one unit
		if n, err := direct.Get(ctx, "fuel:n:"+tag).Int(); err != nil || n < fuel/70 || n > fuel/32 {
			t.Errorf("RESP%d: the endless script ran %d steps (%v), want %d-%d", proto, n, err, fuel/70, fuel/32)
		}
		caught := "while true do pcall(function() while true do end end) end -- " + tag
		if err := shop.Eval(ctx, caught, nil).Err(); err == nil || !strings.Contains(err.Error(), "stopped by seckill-proxy") {
			t.Errorf("RESP%d: an endless script that catches errors: %v, want it stopped", proto, err)
		}

		counter := redis.NewScript("local n = 0 for i = 1, tonumber(ARGV[1]) do n = n + redis.call('incr', KEYS[1]) - redis.call('get', KEYS[1]) + 1 end return n -- " + tag)
		keys := []string{"fuel:c:" + tag}
		if err := shop.EvalSha(ctx, counter.Hash(), keys, 10).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			t.Errorf("RESP%d: EVALSHA of a script the proxy never saw: %v, want NOSCRIPT", proto, err)
		}
		if got, err := counter.Run(ctx, shop, keys, 10).Int(); err != nil || got != 10 {
			t.Errorf("RESP%d: a loop on a value below the fuel (Script.Run): %d, %v; want 10", proto, got, err)
		}
		if got, err := shop.EvalSha(ctx, counter.Hash(), keys, 5).Int(); err != nil || got != 5 {
			t.Errorf("RESP%d: EVALSHA of the client's SHA1: %d, %v; want 5", proto, got, err)
		}
		loaded := "local n = tonumber(ARGV[1]) while n > 0 do n = n - 1 end return 7 -- load " + tag
		sha, err := shop.ScriptLoad(ctx, loaded).Result()
		if want := redis.NewScript(loaded).Hash(); err != nil || sha != want {
			t.Errorf("RESP%d: SCRIPT LOAD as app: %q, %v; want the client's SHA1 %s", proto, sha, err, want)
		}
		if got, err := shop.ScriptExists(ctx, sha).Result(); err != nil || len(got) != 1 || !got[0] {
			t.Errorf("RESP%d: SCRIPT EXISTS of the loaded script: %v, %v; want [true]", proto, got, err)
		}
		if got, err := shop.EvalSha(ctx, sha, nil, 3).Int(); err != nil || got != 7 {
			t.Errorf("RESP%d: EVALSHA of the loaded script: %d, %v; want 7", proto, got, err)
		}
		cmds, err := shop.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Eval(ctx, loaded, nil, 2)
			return nil
		})
		if err != nil || len(cmds) != 1 || cmds[0].(*redis.Cmd).Val() != int64(7) {
			t.Errorf("RESP%d: a fueled script inside MULTI: %v, %v", proto, cmds, err)
		}
		for what, src := range map[string]string{
			"string.rep of a value": "while true do local s = string.rep('x', ARGV[1]) end",
			"the counter named":     "__seckill_fuel = 1e9 while true do end",
		} {
			if err := shop.Eval(ctx, src+" -- "+tag, nil, 10).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
				t.Errorf("RESP%d: %s as app: %v, want NOPERM", proto, what, err)
			}
		}
		start = time.Now()
		if err := direct.Ping(ctx).Err(); err != nil || time.Since(start) > time.Second {
			t.Fatalf("the server after the fueled scripts: %v in %v; it must still answer", err, time.Since(start))
		}
		_ = shop.Close()
	}
}

// TestAppScriptsCost: the scripts that froze a master, or made it unkillable, through the old
// analyser are refused with NOPERM before they reach Redis, naming what they do, or run
// fueled and are stopped by their fuel (the loops the cost model refuses, the recursion
// through a callback); what an argument decides is decided per call; and the server answers
// at once after every one. Run on a private redis-server: had any got through, it would have
// frozen that one only.
func TestAppScriptsCost(t *testing.T) {
	addr, startRedis := ownRedis(t)
	startRedis()
	s := startOn(t, addr, func(c *conf.Config) {
		c.Users = []conf.User{{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}}
	})
	ctx := context.Background()
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = direct.Close() })
	shop := redis.NewClient(&redis.Options{Addr: s.addr, Username: "shop", Password: "shop-pw", PoolSize: 1})
	t.Cleanup(func() { _ = shop.Close() })
	refused := map[string]struct {
		src  string
		args []any
		why  string
	}{
		"nested literal loops, after a write": {"redis.call('set', KEYS[1], 1) for i=1,1048576 do for j=1,1048576 do end end", nil, "ERR script stopped by seckill-proxy"},
		"a pattern that backtracks in C":      {"return string.find(string.rep('a',1048576), '.-.-.-.-b')", nil, "over the budget"},
		"a callback's recursion":              {"local function f(s) return pcall(string.gsub, s, '.', f) end return f(ARGV[1])", []any{strings.Repeat("a", 1<<16)}, ""},
		"a doubling string":                   {"local s = string.rep('x', 1048576) for i=1,20 do s = s .. s end return #s", nil, "doubles"},
		"KEYS in a fueled loop":               {"while true do redis.call('KEYS', '*') end", nil, "KEYS"},
		"backtracking over a long argument":   {"return string.find(ARGV[1], '.-.-.-.-b')", []any{strings.Repeat("a", 1<<20)}, "input allows"},
	}
	for name, c := range refused {
		start := time.Now()
		err := shop.Eval(ctx, c.src, []string{"cost:" + name}, c.args...).Err()
		switch {
		case c.why == "": // whatever it answers, in time
		case strings.HasPrefix(c.why, "ERR"):
			if err == nil || !strings.HasPrefix(err.Error(), c.why) {
				t.Errorf("%s: %v; want it stopped by its fuel", name, err)
			}
		case err == nil || !strings.HasPrefix(err.Error(), "NOPERM") || !strings.Contains(err.Error(), c.why):
			t.Errorf("%s: %v; want NOPERM naming %q", name, err, c.why)
		}
		if err := direct.Ping(ctx).Err(); err != nil || time.Since(start) > time.Second {
			t.Fatalf("%s: the server answered PING after %v (%v)", name, time.Since(start), err)
		}
	}
	members := make([]any, 200000)
	for i := range members {
		members[i] = i
	}
	if err := direct.SAdd(ctx, "cost:big", members...).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := shop.Eval(ctx, "while true do redis.call('SMEMBERS', KEYS[1]) end", []string{"cost:big"}).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "ERR script stopped by seckill-proxy") {
		t.Errorf("SMEMBERS of 200,000 members in a fueled loop: %v; want it stopped by its fuel", err)
	}
	if err := direct.Ping(ctx).Err(); err != nil || time.Since(start) > 2*time.Second {
		t.Fatalf("SMEMBERS in a fueled loop: the server answered PING after %v (%v)", time.Since(start), err)
	}
	if got, err := shop.Eval(ctx, "return string.find(ARGV[1], '.-.-.-.-b')", nil, "aaab").Int(); err != nil || got != 1 {
		t.Errorf("a backtracking pattern over a short argument: %d, %v; want 1", got, err)
	}
}
