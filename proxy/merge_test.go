package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
)

// TestWholeServerReadsMerged: in front of the cluster, KEYS is the union of every master's
// keys, RANDOMKEY answers a key while any master has one, and SLOWLOG LEN and GET cover every
// master, as one server holding the cluster's data would answer (for an admin, with
// admin_allow, through an unrestricted pass-through user: SLOWLOG is @admin).
func TestWholeServerReadsMerged(t *testing.T) {
	s := start(t, func(c *conf.Config) {
		c.Users = []conf.User{{Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}}
		c.Redis.AdminAllow = []string{"keys", "slowlog"} // refused to pass-through otherwise
		// SLOWLOG is an @admin command, which the restricted pass-through user may not run.
		c.Redis.PassthroughUsername, c.Redis.PassthroughPassword = "", ""
	})
	ctx := context.Background()
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.cfg.Redis.Addrs})
	t.Cleanup(func() { _ = direct.Close() }) // after the keys' cleanup below, which uses it
	c := dialRaw(t, s.addr)
	if got := c.do(t, "AUTH", "ops", "ops-pw"); got != "+OK\r\n" {
		t.Fatalf("AUTH ops = %q", got)
	}

	prefix := newSKU("keys") + ":"
	const n = 3000
	pipe := direct.Pipeline()
	for i := range n {
		pipe.Set(ctx, prefix+strconv.Itoa(i), "v", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pipe := direct.Pipeline()
		for i := range n {
			pipe.Del(ctx, prefix+strconv.Itoa(i))
		}
		_, _ = pipe.Exec(ctx)
	})
	var mu sync.Mutex
	holding := 0
	_ = direct.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		keys, _ := m.Keys(ctx, prefix+"*").Result()
		mu.Lock()
		defer mu.Unlock()
		if len(keys) > 0 {
			holding++
		}
		return nil
	})
	if holding < 2 {
		t.Fatalf("the keys sit on %d masters; the test needs them spread", holding)
	}
	got := c.do(t, "KEYS", prefix+"*")
	if !strings.HasPrefix(got, "*"+strconv.Itoa(n)+"\r\n") {
		t.Fatalf("KEYS %s* answered %.80q, want %d keys", prefix, got, n)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(got, "\r\n") {
		if strings.HasPrefix(line, prefix) {
			seen[line] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("KEYS gave %d distinct keys, want %d", len(seen), n)
	}
	if got := c.do(t, "RANDOMKEY"); !strings.HasPrefix(got, "$") || got == "$-1\r\n" {
		t.Fatalf("RANDOMKEY = %q, want a key", got)
	}

	// The masters' slow logs only grow (up to their length, where they stay) while the test
	// runs, so their sum read directly lies between two reads through the proxy.
	proxyLen := func() int64 {
		got := c.do(t, "SLOWLOG", "LEN")
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(got, ":"), "\r\n"), 10, 64)
		if err != nil {
			t.Fatalf("SLOWLOG LEN = %q", got)
		}
		return n
	}
	before := proxyLen()
	var sum int64
	_ = direct.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		l, _ := m.SlowLogLen(ctx).Result()
		mu.Lock()
		sum += l
		mu.Unlock()
		return nil
	})
	if after := proxyLen(); sum < before || sum > after {
		t.Errorf("SLOWLOG LEN through the proxy: %d then %d; the masters hold %d", before, after, sum)
	}
	entries := c.do(t, "SLOWLOG", "GET", "3")
	if !strings.HasPrefix(entries, "*") {
		t.Fatalf("SLOWLOG GET 3 = %.80q", entries)
	}
	if k, _ := strconv.Atoi(entries[1:strings.Index(entries, "\r\n")]); k > 3 || (sum > 0 && k == 0) {
		t.Fatalf("SLOWLOG GET 3 gave %d entries, the masters hold %d", k, sum)
	}
}
