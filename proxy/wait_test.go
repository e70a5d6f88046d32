package proxy_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/internal/testenv"
)

// TestWaitForTheClientsWrites: WAIT through the proxy has Redis's meaning. In front of the
// cluster, after writes on all three masters, WAIT 1 answers 1 (each master has one replica)
// and every replica holds the writes by then; WAIT for more replicas than there are answers
// what there is once its timeout passes; WAIT with nothing written, and Redisson's probe
// WAIT 0 0, answer at once; INFO's connected_slaves is what each master has, not their sum;
// WAIT inside MULTI runs in the transaction. Arguments Redis refuses, and WAITAOF (which
// Redis 7.0 does not know), get redis-server's own errors.
func TestWaitForTheClientsWrites(t *testing.T) {
	eachUpstream(t, func(t *testing.T, s *stack) {
		cluster := !strings.Contains(t.Name(), "standalone")
		c := dialRaw(t, s.addr)
		direct := dialRaw(t, testenv.Standalone(t))
		replicas := "0"
		if cluster {
			replicas = "1"
		}
		if got := c.do(t, "WAIT", "0", "0"); !strings.HasPrefix(got, ":") {
			t.Fatalf("WAIT 0 0 with nothing written = %q", got)
		}
		keys := []string{"wait:{a}:" + newSKU("k"), "wait:{b}:" + newSKU("k"), "wait:{c}:" + newSKU("k")}
		for _, k := range keys {
			if got := c.do(t, "SET", k, "v", "EX", "60"); got != "+OK\r\n" {
				t.Fatalf("SET %s = %q", k, got)
			}
		}
		if got := c.do(t, "WAIT", replicas, "2000"); got != ":"+replicas+"\r\n" {
			t.Fatalf("WAIT %s 2000 after writes on every master = %q", replicas, got)
		}
		if cluster {
			// Each replica holds the writes its master took before the WAIT answered.
			rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.cfg.Redis.Addrs, ReadOnly: true})
			t.Cleanup(func() { _ = rc.Close() })
			ctx := context.Background()
			var mu sync.Mutex
			held := 0
			err := rc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
				if role, _ := n.Do(ctx, "ROLE").Slice(); len(role) == 0 || role[0] != "slave" {
					return nil
				}
				if err := n.Do(ctx, "READONLY").Err(); err != nil {
					return err
				}
				for _, k := range keys {
					v, err := n.Get(ctx, k).Result()
					switch {
					case err != nil && strings.HasPrefix(err.Error(), "MOVED"):
						continue // another master's slot
					case err != nil || v != "v":
						t.Errorf("replica %s: GET %s = %q, %v right after WAIT", n.Options().Addr, k, v, err)
					}
					mu.Lock()
					held++
					mu.Unlock()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if held != len(keys) {
				t.Errorf("the replicas answered for %d of the %d keys", held, len(keys))
			}
			// The probe each master's WAIT wrote is no key anyone can see: set and deleted in
			// one transaction (it was left for a second, in DBSIZE, KEYS and SCAN).
			if err := rc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
				if ks, err := n.Keys(ctx, "seckill-proxy:wait:*").Result(); err != nil || len(ks) > 0 {
					t.Errorf("master %s after WAIT: probe keys %v (%v)", n.Options().Addr, ks, err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if got := c.do(t, "INFO", "replication"); !strings.Contains(got, "connected_slaves:1\r\n") {
				t.Errorf("INFO replication = %q, want connected_slaves:1 (each master's, not the sum)", got)
			}
		}
		start := time.Now()
		c.do(t, "SET", keys[0], "w")
		if got := c.do(t, "WAIT", "5", "300"); got != ":"+replicas+"\r\n" {
			t.Errorf("WAIT 5 300 = %q, want the %s replica(s) there are", got, replicas)
		}
		if took := time.Since(start); took < 250*time.Millisecond || took > 5*time.Second {
			t.Errorf("WAIT 5 300 took %v, want its timeout", took)
		}
		for _, cmd := range [][]string{{"WAIT", "a", "1"}, {"WAIT", "1", "-1"}, {"WAIT", "1"}, {"WAITAOF", "0", "0", "0"}, {"WAITAOF", "0", "0"}} {
			want := direct.do(t, cmd...)
			if got := c.do(t, cmd...); got != want {
				t.Errorf("%v = %q, redis-server's %q", cmd, got, want)
			}
		}
		c.do(t, "MULTI")
		c.do(t, "SET", keys[1], "x")
		c.do(t, "WAIT", "0", "0")
		if got := c.do(t, "EXEC"); !strings.HasPrefix(got, "*2\r\n+OK\r\n:") {
			t.Errorf("MULTI SET WAIT EXEC = %q", got)
		}
	})
}
