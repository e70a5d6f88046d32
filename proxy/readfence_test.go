package proxy_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/sale"
)

// TestReadOnlyAnswersFenced: an answer that names an order or comes from a flag rests on what
// a replica holds, as a sale's orders do. u1 buys through another proxy (this one knows no
// order of u1's from its own answers, which it may tell again: a replica held them when it
// first told them). Then, with the sale's replica stopped (well within the node timeout): a
// buy whose call sells nothing (u1's second buy) is answered UNAVAILABLE, not DUPLICATE with
// the order id, since buy.lua writes the sale's fence when it wrote nothing and the WAIT after
// it comes back short; and a sold-out event is not believed into a flag, since the flag's
// reads are fenced too: the sale's buyers keep going to Redis and are answered UNAVAILABLE
// rather than DUPLICATE or SOLDOUT from the flag. Once the replica answers again, the same
// buys are answered DUPLICATE and SOLDOUT. Without the fences, the flag is set from the
// master alone and answers both at once.
func TestReadOnlyAnswersFenced(t *testing.T) {
	cfg := newConfig(t, func(c *conf.Config) { c.Buy.CallTimeout = 200 * time.Millisecond })
	s, other := startProxy(t, cfg, true), startProxy(t, cfg, true)
	c, oc := s.client(t, 1), other.client(t, 1)
	ctx := context.Background()
	sku := newSKU("rofence")
	k := sale.KeysFor(sku)
	s.sale(t, c, sku, 2)

	var order string
	eventually(t, 10*time.Second, "u1's buy answered", func() bool {
		v, err := oc.Do(ctx, "seckill.buy", sku, "u1").Text()
		switch {
		case err == nil:
			order = v
		case strings.HasPrefix(err.Error(), "DUPLICATE "):
			order = strings.TrimPrefix(err.Error(), "DUPLICATE ")
		case !strings.HasPrefix(err.Error(), "UNAVAILABLE"):
			t.Fatal(err)
		}
		return order != ""
	})
	master, _, replica := saleNodes(t, s, k.Stock)
	pid := pidOf(t, replica)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer resume()

	unavailable := func(uid, why string) {
		t.Helper()
		err := c.Do(ctx, "seckill.buy", sku, uid).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "UNAVAILABLE") {
			t.Errorf("%s with the replica stopped: %v, want UNAVAILABLE (%s)", uid, err, why)
		}
	}
	unavailable("u1", "its DUPLICATE rests on a read no replica was asked to hold")

	// The sale sold out behind the proxy (its last unit taken on the master alone), and
	// another proxy's word for it.
	if err := master.Set(ctx, k.Stock, "0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	heard := s.field("sale_events")
	if err := s.rc.Publish(ctx, guard.EventsChannel, "soldout "+sku+" another-proxy").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the sold-out event acted on", func() bool { return s.field("sale_events") > heard })
	unavailable("u1", "a flag read from the master alone would answer DUPLICATE")
	unavailable("u2", "a flag read from the master alone would answer SOLDOUT")
	resume()

	eventually(t, 10*time.Second, "u1 told its order once the replica answers", func() bool {
		err := c.Do(ctx, "seckill.buy", sku, "u1").Err()
		return err != nil && err.Error() == "DUPLICATE "+order
	})
	eventually(t, 10*time.Second, "u2 told SOLDOUT once the replica answers", func() bool {
		err := c.Do(ctx, "seckill.buy", sku, "u2").Err()
		return err != nil && strings.HasPrefix(err.Error(), "SOLDOUT")
	})
}

// TestReadOnlyCallWritesFence: a buy call that wrote nothing writes the sale's fence key (set
// and deleted), so that the WAIT after it counts a write of its own whatever Redis takes a
// read-only connection's WAIT to cover; a call that sold writes none. Seen on a private
// redis-server's keyspace notifications, in order against a marker key set between buys.
func TestReadOnlyCallWritesFence(t *testing.T) {
	addr, startRedis := ownRedis(t)
	startRedis()
	ctx := context.Background()
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = direct.Close() })
	if err := direct.ConfigSet(ctx, "notify-keyspace-events", "Kg$").Err(); err != nil {
		t.Fatal(err)
	}
	s := startOn(t, addr, func(c *conf.Config) { c.Buy.NoReplica = conf.NoReplicaTell })
	c := s.client(t, 1)
	sku := newSKU("fencekey")
	k := sale.KeysFor(sku)
	s.sale(t, c, sku, 2)
	marker := k.Meta + ":marker"
	t.Cleanup(func() { direct.Del(context.Background(), marker) })
	sub := direct.Subscribe(ctx, "__keyspace@0__:"+k.Fence, "__keyspace@0__:"+marker)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	events := sub.Channel()
	next := func() string {
		t.Helper()
		select {
		case m := <-events:
			return strings.TrimPrefix(m.Channel, "__keyspace@0__:") + " " + m.Payload
		case <-time.After(5 * time.Second):
			t.Fatal("no keyspace event within 5 s")
			return ""
		}
	}
	mark := func() {
		t.Helper()
		if err := direct.Set(ctx, marker, "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got := next(); got != marker+" set" {
			t.Fatalf("keyspace event %q, want the marker's set (a fence written before it?)", got)
		}
	}
	fenced := func(uid, want string) {
		t.Helper()
		err := c.Do(ctx, "seckill.buy", sku, uid).Err()
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("%s: %v, want %s", uid, err, want)
		}
		if got := next(); got != k.Fence+" set" {
			t.Fatalf("after %s's %v: keyspace event %q, want the fence's set", uid, err, got)
		}
		if got := next(); got != k.Fence+" del" {
			t.Fatalf("after %s's %v: keyspace event %q, want the fence's del", uid, err, got)
		}
		mark()
	}
	if _, err := c.Do(ctx, "seckill.buy", sku, "u1").Text(); err != nil {
		t.Fatal(err)
	}
	mark() // the call that sold wrote no fence
	// Answers Redis gives (this proxy knows neither buyer, nor that the sale sold out): a
	// buyer another proxy sold, then the last unit gone elsewhere.
	if err := direct.HSet(ctx, k.Buyers, "u9", "elsewhere:1").Err(); err != nil {
		t.Fatal(err)
	}
	fenced("u9", "DUPLICATE elsewhere")
	if err := direct.Set(ctx, k.Stock, "0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	fenced("u2", "SOLDOUT")
	if n := direct.Exists(ctx, k.Fence).Val(); n != 0 {
		t.Fatalf("the fence key is held after the calls")
	}
}
