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
		c.Redis.AdminAllow = []string{"slowlog", "latency"} // refused to pass-through otherwise
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

	// LATENCY: a slow script on every master makes a "command" event on each; LATEST through
	// the proxy has one entry for it, with the highest maximum of the masters'.
	var highest int64
	_ = direct.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		m.ConfigSet(ctx, "latency-monitor-threshold", "1")
		m.Do(ctx, "LATENCY", "RESET")
		m.Eval(ctx, "local s = redis.call('TIME') repeat local n = redis.call('TIME') until (n[1] - s[1]) * 1000000 + n[2] - s[2] > 20000 return 1", nil)
		m.ConfigSet(ctx, "latency-monitor-threshold", "0")
		latest, _ := m.Do(ctx, "LATENCY", "LATEST").Slice()
		for _, e := range latest {
			if f, ok := e.([]any); ok && len(f) >= 4 && f[0] == "command" {
				mu.Lock()
				highest = max(highest, f[3].(int64))
				mu.Unlock()
			}
		}
		return nil
	})
	latest := c.do(t, "LATENCY", "LATEST")
	if highest == 0 || strings.Count(latest, "$7\r\ncommand\r\n") != 1 || !strings.Contains(latest, ":"+strconv.FormatInt(highest, 10)+"\r\n") {
		t.Errorf("LATENCY LATEST = %q, want one command event with the masters' highest maximum %d", latest, highest)
	}
	if got := c.do(t, "LATENCY", "RESET"); !strings.HasPrefix(got, ":") {
		t.Errorf("LATENCY RESET = %q", got)
	}
	if got := c.do(t, "LATENCY", "LATEST"); got != "*0\r\n" {
		t.Errorf("LATENCY LATEST after RESET = %q, want every master's reset", got)
	}
}

// TestScanWholeCluster: a full SCAN through the proxy over 100,000 keys spread on every
// master returns each key exactly once, with MATCH, and ends with cursor 0.
func TestScanWholeCluster(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.cfg.Redis.Addrs})
	t.Cleanup(func() { _ = direct.Close() })
	prefix := newSKU("scan") + ":"
	const n = 100000
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
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	t.Cleanup(func() { _ = c.Close() })
	seen := make(map[string]int, n)
	var cursor uint64
	for calls := 0; ; calls++ {
		if calls > 10*n {
			t.Fatal("SCAN did not end")
		}
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 5000).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			seen[k]++
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if len(seen) != n {
		t.Fatalf("SCAN returned %d distinct keys, want %d", len(seen), n)
	}
	for k, times := range seen {
		if times != 1 {
			t.Fatalf("SCAN returned %s %d times", k, times)
		}
	}
}

// TestDebugReachesEveryMaster: in front of the cluster, a DEBUG subcommand that changes how a
// server behaves reaches every master (the example: SET-DISABLE-DENY-SCRIPTS reached
// one, and scripts on the others were still refused), one that reads a key goes to the key's
// master, and Redis's own refusal comes back in Redis's words. The dev stack's nodes run with
// enable-debug-command local.
func TestDebugReachesEveryMaster(t *testing.T) {
	s := start(t, func(c *conf.Config) {
		c.Users = []conf.User{{Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}}
		c.Redis.AdminAllow = []string{"debug"}
		c.Redis.PassthroughUsername, c.Redis.PassthroughPassword = "", "" // DEBUG is @admin
	})
	ctx := context.Background()
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.cfg.Redis.Addrs})
	t.Cleanup(func() { _ = direct.Close() })
	if v, err := direct.ConfigGet(ctx, "enable-debug-command").Result(); err != nil || v["enable-debug-command"] == "no" {
		t.Fatalf("the cluster's nodes refuse DEBUG (enable-debug-command %v, %v): restart the dev stack (scripts/devstack.sh down; up)", v, err)
	}
	c := dialRaw(t, s.addr)
	if got := c.do(t, "AUTH", "ops", "ops-pw"); got != "+OK\r\n" {
		t.Fatalf("AUTH ops = %q", got)
	}
	const script = "return redis.call('client','id')" // CLIENT is denied to scripts
	allowed := func() (n, masters int) {
		var mu sync.Mutex
		_ = direct.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			_, err := m.Eval(ctx, script, nil).Result()
			mu.Lock()
			defer mu.Unlock()
			masters++
			if err == nil {
				n++
			}
			return nil
		})
		return n, masters
	}
	t.Cleanup(func() { c.do(t, "DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0") })
	if got := c.do(t, "DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"); got != "+OK\r\n" {
		t.Fatalf("DEBUG SET-DISABLE-DENY-SCRIPTS 1 = %q", got)
	}
	if n, masters := allowed(); n != masters || masters < 2 {
		t.Fatalf("after DEBUG SET-DISABLE-DENY-SCRIPTS 1, %d of %d masters let a script run CLIENT", n, masters)
	}
	if got := c.do(t, "DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"); got != "+OK\r\n" {
		t.Fatalf("DEBUG SET-DISABLE-DENY-SCRIPTS 0 = %q", got)
	}
	if n, _ := allowed(); n != 0 {
		t.Fatalf("after DEBUG SET-DISABLE-DENY-SCRIPTS 0, %d masters still let a script run CLIENT", n)
	}
	// A key's subcommand goes to the key's master (elsewhere it would answer "no such key").
	for i := range 8 {
		key := newSKU("dbg") + strconv.Itoa(i)
		if err := direct.Set(ctx, key, "value", 0).Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { direct.Del(ctx, key) })
		if got := c.do(t, "DEBUG", "OBJECT", key); !strings.HasPrefix(got, "+Value at:") {
			t.Fatalf("DEBUG OBJECT %s = %q", key, got)
		}
	}
	if got := c.do(t, "DEBUG", "NOSUCHSUB"); !strings.HasPrefix(got, "-ERR unknown subcommand") || strings.Contains(got, "masters") {
		t.Fatalf("DEBUG NOSUCHSUB = %q, want Redis's own error", got)
	}
}
