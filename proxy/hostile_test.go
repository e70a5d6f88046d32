package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
)

// Hostile clients (issue 72): what one request can make the proxy, or the Redis behind it,
// do to everyone else.

// chainScript is a script whose names depend on each other along 2^k paths: each line gives
// a name the one before it twice, and the loop's bound asks for the last one. At k = 30, its
// 729 bytes held a proxy's event loop for ever (the cost model worked the bound out once per
// path). It runs one step.
func chainScript(k int) string {
	var b strings.Builder
	b.WriteString("local a0 = 1\n")
	for i := 1; i <= k; i++ {
		fmt.Fprintf(&b, "local a%d = a%d + a%d\n", i, i-1, i-1)
	}
	fmt.Fprintf(&b, "for i = 1, a%d - a%[1]d + 1 do local x = string.find('x', 'x') end\nreturn 1\n", k)
	return b.String()
}

// TestScriptCheckerBounded: the chain script is judged in time bounded by its size, off the
// event loop, from a client that need not log in (no users: every client is an admin, whose
// scripts are judged for the verdicts kept) and from an app user: it runs (fueled, for the app
// user), and meanwhile another client's PINGs and GETs through the same proxy are answered
// and /readyz says ready. Run on a private redis-server.
func TestScriptCheckerBounded(t *testing.T) {
	addr, startRedis := ownRedis(t)
	startRedis()
	for name, users := range map[string][]conf.User{
		"no users": nil,
		"app user": {{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}, {Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}},
	} {
		t.Run(name, func(t *testing.T) {
			s := startOn(t, addr, func(c *conf.Config) { c.Users = users })
			ctx := context.Background()
			opt := func() *redis.Options { return &redis.Options{Addr: s.addr, PoolSize: 1, MaxRetries: -1} }
			attacker, victim := opt(), opt()
			if users != nil {
				attacker.Username, attacker.Password = "shop", "shop-pw"
				victim.Username, victim.Password = "ops", "ops-pw"
			}
			a, v := redis.NewClient(attacker), redis.NewClient(victim)
			t.Cleanup(func() { _ = a.Close(); _ = v.Close() })
			if err := v.Set(ctx, "hostile:chain", "x", 0).Err(); err != nil {
				t.Fatal(err)
			}
			src := chainScript(30)
			if len(src) > 800 {
				t.Fatalf("the chain is %d bytes", len(src))
			}
			answered := make(chan error, 1)
			go func() { answered <- a.Eval(ctx, src, nil).Err() }()
			for i := 0; i < 20; i++ {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := v.Ping(pctx).Err()
				if err == nil {
					err = v.Get(pctx, "hostile:chain").Err()
				}
				cancel()
				if err != nil {
					t.Fatalf("another client's PING or GET while the chain is judged: %v", err)
				}
			}
			rec := httptest.NewRecorder()
			s.admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("/readyz: %d %s", rec.Code, rec.Body)
			}
			select {
			case err := <-answered:
				if err != nil {
					t.Fatalf("the chain script: %v, want it to run", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the chain script had no answer in 30 s")
			}
		})
	}
}
