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
		return m.Do(ctx, "CLUSTER", "SETSLOT", slot, state, id)
	}
	setNode := func(id string) {
		for _, m := range masters {
			if err := setSlot(m, "NODE", id).Err(); err != nil {
				t.Errorf("CLUSTER SETSLOT %d NODE on %s: %v", slot, m.Options().Addr, err)
			}
		}
	}
	t.Cleanup(func() {
		// Whatever happened, the slot and its keys go back to the first master.
		_ = setSlot(to, "MIGRATING", fromID).Err()
		_ = setSlot(from, "IMPORTING", toID).Err()
		to.Del(ctx, moved, stays)
		from.Del(ctx, moved, stays)
		setNode(fromID)
	})

	c := dialRaw(t, s.addr)
	for _, k := range []string{moved, stays} {
		if got := c.do(t, "SET", k, "v-"+k); got != "+OK\r\n" {
			t.Fatalf("SET %s = %q", k, got)
		}
	}
	host, port, _ := strings.Cut(to.Options().Addr, ":")
	steps := []error{
		setSlot(to, "IMPORTING", fromID).Err(),
		setSlot(from, "MIGRATING", toID).Err(),
		from.Migrate(ctx, host, port, moved, 0, 5e9).Err(),
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

	// Done: the slot is the new master's; the proxy's map still says the old one (MOVED).
	if err := from.Migrate(ctx, host, port, stays, 0, 5e9).Err(); err != nil {
		t.Fatal(err)
	}
	setNode(toID)
	for _, k := range []string{moved, stays} {
		if got := c.do(t, "GET", k); got != want(k) {
			t.Fatalf("GET %s after the slot moved = %q", k, got)
		}
	}
	if got := c.do(t, "DEL", moved, stays); got != ":2\r\n" {
		t.Fatalf("DEL after the slot moved = %q", got)
	}
}
