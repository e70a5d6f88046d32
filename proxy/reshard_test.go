package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"

	"seckill-proxy/upstream"
)

// TestReshardRedirects moves one slot from its master to another the way redis-cli --cluster
// reshard does, and reads and writes its keys through the proxy at each step: while the slot
// migrates (the old master answers ASK for a key already moved) and after (it answers MOVED
// to a proxy whose slot map is stale). The client never sees a redirect. The slot goes back
// to its master at the end.
func TestReshardRedirects(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	key := "reshard:" + xid.New().String()
	moved, stays := "{"+key+"}:a", "{"+key+"}:b"
	slot := int(upstream.Slot([]byte(moved)))

	from, err := s.rc.MasterForKey(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	var to *redis.Client
	var masters []*redis.Client
	var mu sync.Mutex // ForEachMaster calls in parallel
	err = s.rc.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range masters {
		if m.Options().Addr != from.Options().Addr {
			to = m
			break
		}
	}
	fromID, toID := from.ClusterMyID(ctx).Val(), to.ClusterMyID(ctx).Val()
	if fromID == "" || toID == "" {
		t.Fatal("cannot read the masters' node ids")
	}
	setSlot := func(m *redis.Client, state, id string) *redis.Cmd {
		if id == "" { // STABLE
			return m.Do(ctx, "CLUSTER", "SETSLOT", slot, state)
		}
		return m.Do(ctx, "CLUSTER", "SETSLOT", slot, state, id)
	}
	setNode := func(id string) {
		for _, m := range masters {
			if err := setSlot(m, "NODE", id).Err(); err != nil {
				t.Errorf("CLUSTER SETSLOT %d NODE on %s: %v", slot, m.Options().Addr, err)
			}
		}
	}
	host := func(m *redis.Client) (string, string) { h, p, _ := strings.Cut(m.Options().Addr, ":"); return h, p }
	// migrateAll moves every key of the slot from src to dst, as a reshard does (the slot may
	// hold other tests' and benchmarks' keys).
	migrateAll := func(src, dst *redis.Client) error {
		h, p := host(dst)
		for {
			keys := src.ClusterGetKeysInSlot(ctx, slot, 100).Val()
			if len(keys) == 0 {
				return nil
			}
			args := []any{"MIGRATE", h, p, "", 0, 5000, "KEYS"}
			for _, k := range keys {
				args = append(args, k)
			}
			if err := src.Do(ctx, args...).Err(); err != nil {
				return err
			}
		}
	}
	owned := false // the slot is the new master's
	t.Cleanup(func() {
		// Whatever happened, the slot and its keys go back to the first master, and no node is
		// left migrating or importing it (which NODE does not undo on the slot's owner).
		if owned {
			_ = setSlot(to, "MIGRATING", fromID).Err()
			_ = setSlot(from, "IMPORTING", toID).Err()
			if err := migrateAll(to, from); err != nil {
				t.Errorf("moving the slot's keys back: %v", err)
			}
		} else { // midway: the new master holds this test's keys, served only after ASKING
			conn := to.Conn()
			_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range to.ClusterGetKeysInSlot(ctx, slot, 1000).Val() {
					p.Do(ctx, "ASKING")
					p.Del(ctx, k)
				}
				return nil
			})
			_ = conn.Close()
		}
		setNode(fromID)
		_ = setSlot(from, "STABLE", "").Err()
		_ = setSlot(to, "STABLE", "").Err()
	})

	c := dialRaw(t, s.addr)
	for _, k := range []string{moved, stays} {
		if got := c.do(t, "SET", k, "v-"+k); got != "+OK\r\n" {
			t.Fatalf("SET %s = %q", k, got)
		}
	}
	toHost, toPort := host(to)
	steps := []error{
		setSlot(to, "IMPORTING", fromID).Err(),
		setSlot(from, "MIGRATING", toID).Err(),
		from.Migrate(ctx, toHost, toPort, moved, 0, 5e9).Err(),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("migration step %d: %v", i, err)
		}
	}
	// Mid-migration: the old master has one key and answers ASK for the other.
	if got := from.Exists(ctx, moved).Val(); got != 0 {
		t.Fatalf("the migrated key is still on the old master (%d)", got)
	}
	want := func(k string) string { return "$" + strconv.Itoa(len("v-"+k)) + "\r\nv-" + k + "\r\n" }
	for _, k := range []string{moved, stays} {
		if got := c.do(t, "GET", k); got != want(k) {
			t.Fatalf("GET %s while the slot migrates = %q", k, got)
		}
	}
	if got := c.do(t, "MGET", moved, stays); got != "*2\r\n"+want(moved)+want(stays) && !strings.HasPrefix(got, "-TRYAGAIN") {
		t.Fatalf("MGET across the migration = %q", got)
	}
	// A pipeline of new keys in the slot: each is redirected (ASK), in the order sent.
	var pipeline strings.Builder
	var replies []string
	for j := range 50 {
		k, v := "{"+key+"}:p"+strconv.Itoa(j), strconv.Itoa(j)
		pipeline.WriteString(respCmd("SET", k, v) + respCmd("GET", k) + respCmd("DEL", k))
		replies = append(replies, "+OK\r\n", "$"+strconv.Itoa(len(v))+"\r\n"+v+"\r\n", ":1\r\n")
	}
	c.expect(t, pipeline.String(), replies...)

	// Done: the slot is the new master's; the proxy's map still says the old one (MOVED).
	if err := migrateAll(from, to); err != nil {
		t.Fatal(err)
	}
	setNode(toID)
	owned = true
	for _, k := range []string{moved, stays} {
		if got := c.do(t, "GET", k); got != want(k) {
			t.Fatalf("GET %s after the slot moved = %q", k, got)
		}
	}
	if got := c.do(t, "DEL", moved, stays); got != ":2\r\n" {
		t.Fatalf("DEL after the slot moved = %q", got)
	}
}
