package guard

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/internal/testenv"
)

// TestClusterSmoke proves the Redis Cluster is real: a go-redis ClusterClient sees three
// masters, each with one replica whose link is up.
func TestClusterSmoke(t *testing.T) {
	addrs := testenv.Redis(t)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ClusterStateReloadInterval: time.Second})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	shards, err := rc.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 3 {
		t.Fatalf("cluster has %d shards, want 3", len(shards))
	}
	for _, s := range shards {
		var masters, replicas int
		for _, n := range s.Nodes {
			switch {
			case n.Role == "master" && n.Health == "online":
				masters++
			case n.Role == "replica" && n.Health == "online":
				replicas++
			}
		}
		if masters != 1 || replicas != 1 {
			t.Errorf("shard %v has %d masters and %d replicas online, want 1 and 1", s.Slots, masters, replicas)
		}
	}
	var seen atomic.Int32
	err = rc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "connected_slaves:1") {
			t.Errorf("%s: %q", c.Options().Addr, info)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { seen.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	if seen.Load() != 6 {
		t.Fatalf("ForEachShard visited %d nodes, want 6", seen.Load())
	}
}
