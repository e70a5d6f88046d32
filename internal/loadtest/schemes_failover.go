package loadtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
)

// A master failover during a scheme's sale (seckill-bench schemes -failover): once a quarter
// of the units are told sold, the replica of the master that holds the scheme's stock takes
// over with CLUSTER FAILOVER FORCE, which does not wait for the replica to catch up with its
// master: the writes the master acknowledged and had not yet sent are lost, as in a real
// failover after a crash. The old master lives on, and becomes a replica of the new one.

// failover forces one failover of the master of key when the orders told reach at. The sale
// goes on meanwhile: the buyers' replies count what it cost.
type failover struct {
	redis conf.Redis
	key   string
	at    int64

	told    atomic.Int64
	started atomic.Bool
	done    chan struct{}
	mu      sync.Mutex
	what    string // what happened, for the table
}

func newFailover(c conf.Redis, key string, at int64) *failover {
	return &failover{redis: c, key: key, at: max(1, at), done: make(chan struct{}), what: "not forced: too few orders"}
}

// onOrder is Run's hook: the at-th order told starts the failover.
func (f *failover) onOrder(string, time.Time) {
	if f.told.Add(1) == f.at {
		f.started.Store(true)
		go f.run()
	}
}

// wait waits for a failover started to end, and says what happened.
func (f *failover) wait() string {
	if f.started.Load() {
		<-f.done
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.what
}

func (f *failover) run() {
	defer close(f.done)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	master, replica, err := forceFailover(ctx, f.redis, f.key)
	what := fmt.Sprintf("%s to %s after %d orders, promoted in %d ms", master, replica, f.at, time.Since(t0).Milliseconds())
	if err != nil {
		what = "failed: " + err.Error()
	}
	f.mu.Lock()
	f.what = what
	f.mu.Unlock()
}

// forceFailover promotes the replica of the master that owns key's slot, and waits until it
// says it is a master.
func forceFailover(ctx context.Context, c conf.Redis, key string) (master, replica string, err error) {
	node := func(addr string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr, Username: c.Username, Password: c.Password, Protocol: 2, DisableIdentity: true})
	}
	var text string
	var slot int64
	for _, addr := range c.Addrs {
		n := node(addr)
		if slot, err = n.ClusterKeySlot(ctx, key).Result(); err == nil {
			text, err = n.ClusterNodes(ctx).Result()
		}
		n.Close()
		if err == nil {
			break
		}
	}
	if err != nil {
		return "", "", fmt.Errorf("reading the cluster: %w", err)
	}
	if master, replica, err = connect.SlotReplica(text, int(slot)); err != nil || replica == "" {
		return master, replica, errors.Join(err, fmt.Errorf("no live replica of %q's master %q", key, master))
	}
	r := node(replica)
	defer r.Close()
	// A manual failover that wins no election in 5 s is given up (the masters refuse a second
	// vote for the same slots within twice the node timeout, after an earlier failover): ask
	// again until ctx ends.
	for ctx.Err() == nil {
		if err := r.Do(ctx, "CLUSTER", "FAILOVER", "FORCE").Err(); err != nil {
			return master, replica, fmt.Errorf("CLUSTER FAILOVER FORCE on %s: %w", replica, err)
		}
		for asked := time.Now(); ctx.Err() == nil && time.Since(asked) < 6*time.Second; time.Sleep(10 * time.Millisecond) {
			if role, err := r.Do(ctx, "ROLE").Slice(); err == nil && len(role) > 0 && role[0] == "master" {
				return master, replica, nil
			}
		}
	}
	return master, replica, fmt.Errorf("%s did not become a master: %w", replica, ctx.Err())
}

// failoverPace spaces the forced failovers of RunSchemes: Redis Cluster's masters refuse a
// second vote for the same slots within twice the node timeout, and a demoted master needs a
// moment to sync from the new one, so each round waits for both before it sells.
type failoverPace struct {
	redis conf.Redis
	last  time.Time // when the last failover ended
}

// ready waits until twice the cluster's node timeout has passed since the last failover and
// every master has a replica in sync with it.
func (p *failoverPace) ready(ctx context.Context) error {
	n := redis.NewClient(&redis.Options{Addr: p.redis.Addrs[0], Username: p.redis.Username, Password: p.redis.Password, Protocol: 2, DisableIdentity: true})
	defer n.Close()
	gap := 30 * time.Second // Redis's default node timeout, 15 s, twice
	if v, err := n.ConfigGet(ctx, "cluster-node-timeout").Result(); err == nil {
		if ms, err := strconv.Atoi(v["cluster-node-timeout"]); err == nil {
			gap = 2 * time.Duration(ms) * time.Millisecond
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(p.last.Add(gap + time.Second))):
	}
	deadline := time.Now().Add(60 * time.Second)
	for !p.replicated(ctx, n) {
		if time.Now().After(deadline) {
			return errors.New("not every master had a replica in sync within 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// replicated is whether every master that owns slots, as n sees the cluster, has a replica
// whose link to it is up.
func (p *failoverPace) replicated(ctx context.Context, n *redis.Client) bool {
	text, err := n.ClusterNodes(ctx).Result()
	if err != nil {
		return false
	}
	masters, err := connect.Replicas(text)
	if err != nil || len(masters) == 0 {
		return false
	}
	for _, replicas := range masters {
		synced := false
		for _, addr := range replicas {
			r := redis.NewClient(&redis.Options{Addr: addr, Username: p.redis.Username, Password: p.redis.Password, Protocol: 2, DisableIdentity: true})
			role, err := r.Do(ctx, "ROLE").Slice()
			r.Close()
			synced = synced || (err == nil && len(role) >= 4 && role[0] == "slave" && role[3] == "connected")
		}
		if !synced {
			return false
		}
	}
	return true
}
