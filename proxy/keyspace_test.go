package proxy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/internal/testenv"
)

// keyspaceCases are Redis's own test suite's COPY and expiry cases (unit/keyspace,
// unit/expire), as contract cases: each reply through the proxy must be the one redis-server
// gives, byte for byte.
var keyspaceCases = []contractCase{
	{name: "copy a string", cmds: [][]string{
		{"SET", "{k}a", "hello"}, {"COPY", "{k}a", "{k}b"}, {"GET", "{k}b"}, {"COPY", "{k}a", "{k}b"},
		{"SET", "{k}a", "world"}, {"COPY", "{k}a", "{k}b", "REPLACE"}, {"GET", "{k}b"}, {"APPEND", "{k}b", "!"},
		{"GET", "{k}a"}, {"COPY", "{k}nope", "{k}c"}, {"COPY", "{k}a", "{k}a"}}},
	{name: "copy keeps an expire, and makes none", cmds: [][]string{
		{"SET", "{k}a", "v", "EX", "100"}, {"COPY", "{k}a", "{k}b"}, {"TTL", "{k}b"},
		{"SET", "{k}c", "v"}, {"COPY", "{k}c", "{k}d"}, {"TTL", "{k}d"}}},
	{name: "copy every type", cmds: [][]string{
		{"RPUSH", "{k}l", "a", "b"}, {"COPY", "{k}l", "{k}l2"}, {"LRANGE", "{k}l2", "0", "-1"},
		{"SADD", "{k}s", "a"}, {"COPY", "{k}s", "{k}s2"}, {"SMEMBERS", "{k}s2"},
		{"ZADD", "{k}z", "1", "a"}, {"COPY", "{k}z", "{k}z2"}, {"ZRANGE", "{k}z2", "0", "-1", "WITHSCORES"},
		{"HSET", "{k}h", "f", "v"}, {"COPY", "{k}h", "{k}h2"}, {"HGETALL", "{k}h2"},
		{"XADD", "{k}x", "1-1", "f", "v"}, {"COPY", "{k}x", "{k}x2"}, {"XRANGE", "{k}x2", "-", "+"}}},
	{name: "expire set, read, written, persisted", cmds: [][]string{
		{"SET", "{k}x", "foobar"}, {"EXPIRE", "{k}x", "5"}, {"EXPIRE", "{k}x", "10"}, {"TTL", "{k}x"},
		{"GET", "{k}x"}, {"APPEND", "{k}x", "!"}, {"TTL", "{k}x"}, {"PERSIST", "{k}x"}, {"TTL", "{k}x"},
		{"PERSIST", "{k}x"}, {"TTL", "{k}nope"}, {"EXPIRE", "{k}nope", "10"}}},
	{name: "expire's NX XX GT LT", cmds: [][]string{
		{"SET", "{k}x", "v"}, {"EXPIRE", "{k}x", "100", "XX"}, {"EXPIRE", "{k}x", "100", "NX"},
		{"EXPIRE", "{k}x", "200", "NX"}, {"EXPIRE", "{k}x", "50", "GT"}, {"EXPIRE", "{k}x", "200", "GT"},
		{"EXPIRE", "{k}x", "300", "LT"}, {"EXPIRE", "{k}x", "100", "LT"}, {"TTL", "{k}x"},
		{"EXPIRE", "{k}x", "100", "NX", "XX"}, {"EXPIRE", "{k}x", "100", "GT", "LT"}}},
	{name: "setex, getex, expireat in the past", cmds: [][]string{
		{"SETEX", "{k}a", "100", "v"}, {"TTL", "{k}a"}, {"SETEX", "{k}a", "0", "v"}, {"SETEX", "{k}a", "-1", "v"},
		{"GETEX", "{k}a", "PERSIST"}, {"SET", "{k}b", "v"}, {"GETEX", "{k}b", "EX", "100"}, {"TTL", "{k}b"},
		{"EXPIREAT", "{k}b", "1"}, {"EXISTS", "{k}b"}, {"PEXPIRE", "{k}a", "-1"}}},
}

// TestKeyspaceBesideASale: with a sale open (its keys in another slot), Redis's own COPY and
// expiry cases answer through the proxy as redis-server answers them, in front of the
// cluster and of a standalone server.
func TestKeyspaceBesideASale(t *testing.T) {
	eachUpstream(t, func(t *testing.T, s *stack) {
		s.sale(t, s.client(t, 1), newSKU("keyspace"), 5)
		direct := testenv.Standalone(t)
		for _, tc := range keyspaceCases {
			t.Run(tc.name, func(t *testing.T) {
				want := runContract(t, direct, tc.cmds, false)
				got := runContract(t, s.addr, tc.cmds, false)
				for i := range tc.cmds {
					if got[i] != want[i] {
						t.Errorf("%s: proxy %q, redis %q", strings.Join(tc.cmds[i], " "), got[i], want[i])
					}
				}
			})
		}
	})
}

// TestKeyspaceIsTheApplications: in front of a Redis of the test's own, DBSIZE, KEYS and
// SCAN count the application's keys and the open sale's (the one namespace the proxy owns,
// seckill:), and nothing else; with no sale, a FLUSHALL leaves no key at all while the proxy
// runs on (its sweeper and late-order watch lease nothing, WAIT leaves no probe).
func TestKeyspaceIsTheApplications(t *testing.T) {
	addr, startRedis := ownRedis(t)
	startRedis()
	s := startOn(t, addr, func(c *conf.Config) {
		c.Outbox.SweepInterval, c.Outbox.LeaseTTL = 50*time.Millisecond, 100*time.Millisecond
	})
	ctx := context.Background()
	c := s.client(t, 1)
	rc := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rc.Close() })

	sku := newSKU("keyspace")
	s.sale(t, c, sku, 5)
	if err := c.Do(ctx, "seckill.buy", sku, "u1").Err(); err != nil {
		t.Fatal(err)
	}
	app := []string{"app:a", "app:b", "app:c"}
	for _, k := range app {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// What the proxy added to Redis on its own is in seckill:, and only there.
	keys := func() (own, sales []string) {
		all, err := c.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range all {
			if strings.HasPrefix(k, "seckill:") {
				sales = append(sales, k)
			} else {
				own = append(own, k)
			}
		}
		slices.Sort(own)
		return own, sales
	}
	// The sweeper's lease (a seckill: key, while the sale exists) is taken and expires every
	// 100 ms here, so the three counts are read again until one reading agrees.
	for deadline := time.Now().Add(10 * time.Second); ; {
		own, sales := keys()
		if !slices.Equal(own, app) || len(sales) == 0 {
			t.Fatalf("KEYS * through the proxy: %v beside %d sale keys; want %v beside some", own, len(sales), app)
		}
		want := int64(len(app) + len(sales))
		viaProxy, onRedis := c.DBSize(ctx).Val(), rc.DBSize(ctx).Val()
		if viaProxy == want && onRedis == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DBSIZE through the proxy %d, on Redis %d; want %d application keys + %d of the sale", viaProxy, onRedis, len(app), len(sales))
		}
	}

	// No sale: after a FLUSHALL on Redis, nothing comes back. The sweeper looks for a lease
	// every 50 ms here; WAIT and a buy of a sale that is gone run meanwhile.
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		_ = c.Do(ctx, "WAIT", "0", "10").Err()
		_ = c.Do(ctx, "seckill.buy", sku, "u2").Err()
		if k := leftKeys(ctx, rc); len(k) != 0 {
			t.Fatalf("%d keys in Redis with no sale and no application key: %v", len(k), k)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := fmt.Sprint(c.DBSize(ctx).Val()); got != "0" {
		t.Fatalf("DBSIZE through the proxy = %s after FLUSHALL", got)
	}
}

// leftKeys are the keys in Redis, but a sweeper's lease taken in the instant of a FLUSHALL
// (its check that sales exist made before it, the lease after) that is given up at once: one
// that is still there 200 ms later is left.
func leftKeys(ctx context.Context, rc *redis.Client) []string {
	for deadline := time.Now().Add(200 * time.Millisecond); ; time.Sleep(10 * time.Millisecond) {
		keys, _ := rc.Keys(ctx, "*").Result()
		leases := 0
		for _, k := range keys {
			if strings.HasPrefix(k, "seckill:{!lead}:") {
				leases++
			}
		}
		if leases == 0 || leases < len(keys) || time.Now().After(deadline) {
			return keys
		}
	}
}
