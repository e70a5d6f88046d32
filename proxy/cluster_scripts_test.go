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

// TestClusterServesAsOneServer: in front of the cluster, a keyless EVAL's script is cached on
// every master, as one server would have it (SCRIPT EXISTS answers 1, and EVALSHA of it never
// gets NOSCRIPT, wherever it goes); XGROUP and XINFO go to their key's master at once, with
// no MOVED counted in Redis's error statistics; SAVE, BGSAVE and BGREWRITEAOF, which an admin
// may be allowed, run on every master; and LATENCY HISTOGRAM sums every master's calls and
// buckets, in RESP2 and RESP3.
func TestClusterServesAsOneServer(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	c := s.client(t, 1)
	body := "return 'keyless " + newSKU("ev") + "'"
	if got, err := c.Eval(ctx, body, nil).Text(); err != nil || !strings.HasPrefix(got, "keyless") {
		t.Fatalf("a keyless EVAL: %q, %v", got, err)
	}
	sha := redis.NewScript(body).Hash()
	if got, err := c.ScriptExists(ctx, sha).Result(); err != nil || len(got) != 1 || !got[0] {
		t.Fatalf("SCRIPT EXISTS after a keyless EVAL: %v, %v; want true (every master has it)", got, err)
	}
	for i := range 12 {
		if err := c.EvalSha(ctx, sha, nil).Err(); err != nil {
			t.Fatalf("EVALSHA %d of the keyless script: %v", i, err)
		}
	}

	moved := func() int64 {
		var mu sync.Mutex
		var n int64
		_ = s.rc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			info, _ := m.Info(ctx, "errorstats").Result()
			for _, l := range strings.Split(info, "\r\n") {
				if v, ok := strings.CutPrefix(l, "errorstat_MOVED:count="); ok {
					k, _ := strconv.ParseInt(v, 10, 64)
					mu.Lock()
					n += k
					mu.Unlock()
				}
			}
			return nil
		})
		return n
	}
	before := moved()
	for i := range 6 {
		key := "xg:{" + strconv.Itoa(i) + "}" + newSKU("s")
		if err := c.XGroupCreateMkStream(ctx, key, "g", "0").Err(); err != nil {
			t.Fatalf("XGROUP CREATE %s: %v", key, err)
		}
		if groups, err := c.XInfoGroups(ctx, key).Result(); err != nil || len(groups) != 1 {
			t.Fatalf("XINFO GROUPS %s: %v, %v", key, groups, err)
		}
		if err := c.XGroupDestroy(ctx, key, "g").Err(); err != nil {
			t.Fatalf("XGROUP DESTROY %s: %v", key, err)
		}
		c.Del(ctx, key)
	}
	if after := moved(); after != before {
		t.Errorf("XGROUP and XINFO cost %d MOVED errors on the masters, want 0", after-before)
	}

	// SAVE and LATENCY are @admin in Redis: an admin's, through admin_allow and a pass-through
	// user that may run them.
	s = start(t, func(c *conf.Config) {
		c.Redis.AdminAllow = []string{"save", "bgsave", "bgrewriteaof", "latency"}
		c.Redis.PassthroughUsername, c.Redis.PassthroughPassword = "", ""
	})
	c = s.client(t, 1)
	rdbSaves := func() map[string]int64 {
		var mu sync.Mutex
		out := map[string]int64{}
		_ = s.rc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			info, _ := m.Info(ctx, "persistence").Result()
			for _, l := range strings.Split(info, "\r\n") {
				if v, ok := strings.CutPrefix(l, "rdb_saves:"); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					mu.Lock()
					out[m.Options().Addr] = n
					mu.Unlock()
				}
			}
			return nil
		})
		return out
	}
	before2 := rdbSaves()
	if got, err := c.Do(ctx, "SAVE").Text(); err != nil || got != "OK" {
		t.Fatalf("SAVE: %q, %v", got, err)
	}
	after2 := rdbSaves()
	if len(after2) != 3 {
		t.Fatalf("rdb_saves read from %d masters, want 3", len(after2))
	}
	for addr, n := range after2 {
		if n <= before2[addr] {
			t.Errorf("master %s: rdb_saves %d after SAVE, %d before: SAVE did not run there", addr, n, before2[addr])
		}
	}

	// LATENCY HISTOGRAM: the calls of EXISTS summed over the masters, between two direct reads.
	for i := range 30 {
		c.Exists(ctx, "lh:{"+strconv.Itoa(i)+"}")
	}
	directCalls := func() int64 {
		var mu sync.Mutex
		var n int64
		_ = s.rc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			v, _ := m.Do(ctx, "LATENCY", "HISTOGRAM", "exists").Slice()
			if len(v) == 2 {
				if f, ok := v[1].([]any); ok && len(f) >= 2 {
					k, _ := f[1].(int64)
					mu.Lock()
					n += k
					mu.Unlock()
				}
			}
			return nil
		})
		return n
	}
	for _, proto := range []int{2, 3} {
		pc := redis.NewClient(&redis.Options{Addr: s.addr, Protocol: proto})
		lo := directCalls()
		v, err := pc.Do(ctx, "LATENCY", "HISTOGRAM", "exists").Result()
		hi := directCalls()
		_ = pc.Close()
		if err != nil {
			t.Fatalf("RESP%d LATENCY HISTOGRAM exists: %v", proto, err)
		}
		var calls int64 = -1
		switch v := v.(type) {
		case []any: // RESP2: exists, [calls, N, histogram_usec, [...]]
			if f, ok := v[1].([]any); ok && len(f) == 4 {
				calls, _ = f[1].(int64)
			}
		case map[any]any: // RESP3
			if f, ok := v["exists"].(map[any]any); ok {
				calls, _ = f["calls"].(int64)
			}
		}
		if calls < lo || calls > hi || lo < 30 {
			t.Errorf("RESP%d LATENCY HISTOGRAM exists: calls %d (%v), the masters' sum read before %d and after %d", proto, calls, v, lo, hi)
		}
	}
}
