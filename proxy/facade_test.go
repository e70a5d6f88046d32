package proxy_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClusterFacade: the proxy answers CLUSTER SLOTS, SHARDS, NODES, INFO, MYID and KEYSLOT as
// a one-node cluster owning every slot at its own address, and accepts READONLY, READWRITE
// and ASKING.
func TestClusterFacade(t *testing.T) { eachUpstream(t, testClusterFacade) }

func testClusterFacade(t *testing.T, s *stack) {
	c := dialRaw(t, s.addr)
	host, port, _ := net.SplitHostPort(s.addr)
	id := bulkBody(c.do(t, "CLUSTER", "MYID"))
	if len(id) != 40 {
		t.Fatalf("CLUSTER MYID = %q", id)
	}
	wantSlots := fmt.Sprintf("*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$%d\r\n%s\r\n:%s\r\n$40\r\n%s\r\n*0\r\n", len(host), host, port, id)
	if got := c.do(t, "CLUSTER", "SLOTS"); got != wantSlots {
		t.Errorf("CLUSTER SLOTS = %q, want %q", got, wantSlots)
	}
	p, _ := strconv.Atoi(port)
	bus := p + 10000
	if bus > 65535 {
		bus = 0
	}
	wantNodes := fmt.Sprintf("%s %s:%s@%d myself,master - 0 0 1 connected 0-16383\n", id, host, port, bus)
	if got := bulkBody(c.do(t, "CLUSTER", "NODES")); got != wantNodes {
		t.Errorf("CLUSTER NODES = %q, want %q", got, wantNodes)
	}
	if got := c.do(t, "CLUSTER", "SHARDS"); !strings.Contains(got, "$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n") || !strings.Contains(got, id) {
		t.Errorf("CLUSTER SHARDS = %q", got)
	}
	if got := bulkBody(c.do(t, "CLUSTER", "INFO")); !strings.HasPrefix(got, "cluster_state:ok\r\ncluster_slots_assigned:16384\r\n") {
		t.Errorf("CLUSTER INFO = %q", got)
	}
	if got := c.do(t, "CLUSTER", "KEYSLOT", "somekey"); got != ":11058\r\n" {
		t.Errorf("CLUSTER KEYSLOT somekey = %q, want 11058 as Redis says", got)
	}
	for _, cmd := range []string{"READONLY", "READWRITE", "ASKING"} {
		if got := c.do(t, cmd); got != "+OK\r\n" {
			t.Errorf("%s = %q", cmd, got)
		}
	}
	if got := c.do(t, "CLUSTER", "SETSLOT", "1", "STABLE"); !strings.Contains(got, "not supported through seckill-proxy") {
		t.Errorf("CLUSTER SETSLOT = %q", got)
	}
}

// TestClusterClientThroughFacade: go-redis's ClusterClient, pointed at the proxy with default
// settings, runs commands over many slots, a pipeline, a transaction on one slot, pub/sub and
// the sale, and sees the sale's errors with their text.
func TestClusterClientThroughFacade(t *testing.T) { eachUpstream(t, testClusterClientThroughFacade) }

func testClusterClientThroughFacade(t *testing.T, s *stack) {
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.addr}})
	defer cc.Close()
	prefix := "facade:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	for i := range 200 {
		if err := cc.Set(ctx, prefix+strconv.Itoa(i), i, time.Minute).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
	}
	cmds, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 200 {
			p.Get(ctx, prefix+strconv.Itoa(i))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	for i, cmd := range cmds {
		if v := cmd.(*redis.StringCmd).Val(); v != strconv.Itoa(i) {
			t.Fatalf("pipelined GET %d = %q", i, v)
		}
	}
	if n, err := cc.Del(ctx, prefix+"1", prefix+"2", prefix+"3").Result(); err != nil || n != 3 {
		t.Fatalf("DEL over slots = %d, %v", n, err)
	}
	tag := "{" + prefix + "tx}"
	if _, err := cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, tag+"a")
		p.Incr(ctx, tag+"a")
		return nil
	}); err != nil {
		t.Fatalf("MULTI on one slot: %v", err)
	}
	if v, err := cc.Get(ctx, tag+"a").Int(); err != nil || v != 2 {
		t.Fatalf("after the transaction %d, %v", v, err)
	}
	sub := cc.Subscribe(ctx, prefix+"ch")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatalf("SUBSCRIBE: %v", err)
	}
	eventually(t, 5*time.Second, "a PUBLISH reaches the subscriber", func() bool {
		return cc.Publish(ctx, prefix+"ch", "hi").Val() >= 1
	})
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "hi" {
		t.Fatalf("message = %v, %v", msg, err)
	}
	sku := newSKU("facade")
	s.sale(t, s.client(t, 1), sku, 1)
	if err := cc.Do(ctx, "SECKILL.BUY", sku, "u1").Err(); err != nil {
		t.Fatalf("BUY: %v", err)
	}
	if err := cc.Do(ctx, "SECKILL.BUY", sku, "u1").Err(); code(err) != "DUPLICATE" {
		t.Fatalf("second BUY = %v, want DUPLICATE", err)
	}
	if err := cc.Do(ctx, "SECKILL.BUY", sku, "u2").Err(); code(err) != "SOLDOUT" {
		t.Fatalf("BUY after the last unit = %v, want SOLDOUT", err)
	}
}
