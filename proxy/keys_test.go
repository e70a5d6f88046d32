package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"seckill-proxy/conf"
)

// TestKeysWalk: KEYS, for any user, is a walk of SCAN over every master (or the one server):
// each matching key once, none other, an empty array when nothing matches, Redis's arity
// error; and past redis.keys_max keys, an error that names the bound, not a reply without one.
// (Spring Data Redis clears a cache with KEYS, then DEL.)
func TestKeysWalk(t *testing.T) {
	eachUpstreamWith(t, func(c *conf.Config) { c.Redis.KeysMax = 2000 }, func(t *testing.T, s *stack) {
		c := s.client(t, 2)
		ctx := context.Background()
		prefix := newSKU("keyswalk") + ":"
		const n = 1500
		pipe := c.Pipeline()
		for i := range n {
			pipe.Set(ctx, prefix+strconv.Itoa(i), "v", 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			pipe := s.client(t, 2).Pipeline()
			for i := range n + 700 {
				pipe.Del(context.Background(), prefix+strconv.Itoa(i))
			}
			_, _ = pipe.Exec(context.Background())
		})
		keys, err := c.Keys(ctx, prefix+"*").Result()
		if err != nil || len(keys) != n {
			t.Fatalf("KEYS %s* = %d keys, %v; want %d", prefix, len(keys), err, n)
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if !strings.HasPrefix(k, prefix) || seen[k] {
				t.Fatalf("KEYS named %q (twice: %v)", k, seen[k])
			}
			seen[k] = true
		}
		if keys, err := c.Keys(ctx, prefix+"1?").Result(); err != nil || len(keys) != 10 {
			t.Fatalf("KEYS %s1? = %v, %v; want 10 keys", prefix, keys, err)
		}
		if keys, err := c.Keys(ctx, prefix+"none*").Result(); err != nil || len(keys) != 0 {
			t.Fatalf("KEYS of nothing = %v, %v; want an empty array", keys, err)
		}
		if err := c.Do(ctx, "KEYS").Err(); err == nil || err.Error() != "ERR wrong number of arguments for 'keys' command" {
			t.Fatalf("bare KEYS: %v", err)
		}
		if err := c.Do(ctx, "KEYS", "a", "b").Err(); err == nil || !strings.Contains(err.Error(), "wrong number of arguments") {
			t.Fatalf("KEYS a b: %v", err)
		}
		// Spring's cache clearing: KEYS, then DEL of what it named.
		if del, err := c.Del(ctx, keys[:100]...).Result(); err != nil || del != 100 {
			t.Fatalf("DEL of 100 named keys = %d, %v", del, err)
		}
		pipe = c.Pipeline()
		for i := n; i < n+700; i++ {
			pipe.Set(ctx, prefix+strconv.Itoa(i), "v", 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		err = c.Keys(ctx, prefix+"*").Err()
		if err == nil || !strings.Contains(err.Error(), "more than 2000 keys (redis.keys_max)") {
			t.Fatalf("KEYS of 2,000+ keys with keys_max 2000: %v", err)
		}
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("the connection after the refused KEYS: %v", err)
		}
		// A pattern each SCAN step would send again is bounded, and so is what one walk holds
		// (1,700 keys of 10 KiB: more than 16 MiB, fewer than keys_max).
		if err := c.Keys(ctx, strings.Repeat("*", 1025)).Err(); err == nil || !strings.Contains(err.Error(), "over the 1024") {
			t.Fatalf("KEYS of a 1,025-byte pattern: %v", err)
		}
		long := prefix + "long:" + strings.Repeat("x", 10<<10)
		pipe = c.Pipeline()
		for i := range 1700 {
			pipe.Set(ctx, long+strconv.Itoa(i), "v", 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			pipe := s.client(t, 2).Pipeline()
			for i := range 1700 {
				pipe.Del(context.Background(), long+strconv.Itoa(i))
			}
			_, _ = pipe.Exec(context.Background())
		})
		if err := c.Keys(ctx, prefix+"long:*").Err(); err == nil || !strings.Contains(err.Error(), "MiB of keys") {
			t.Fatalf("KEYS of 17 MiB of keys: %v", err)
		}
	})
}
