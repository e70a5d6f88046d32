package loadtest

import (
	"context"
	"errors"
	"fmt"
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

// failover forces one failover of the master of key when the orders told reach at.
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
	if err := r.Do(ctx, "CLUSTER", "FAILOVER", "FORCE").Err(); err != nil {
		return master, replica, fmt.Errorf("CLUSTER FAILOVER FORCE on %s: %w", replica, err)
	}
	for ctx.Err() == nil {
		if role, err := r.Do(ctx, "ROLE").Slice(); err == nil && len(role) > 0 && role[0] == "master" {
			return master, replica, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return master, replica, fmt.Errorf("%s did not become a master: %w", replica, ctx.Err())
}
