package connect

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// ReplicaView is how many replicas each master has in the cluster's view, for the writes that
// must reach a replica before they count (WAIT): the proxy's buys and the sink's outcomes.
// WAIT is skipped only on a master with no replica in this view (the replica just promoted
// after its master died, until a new one joins), never because a WAIT timed out: that is
// exactly what a stale master's WAIT does. Safe for concurrent use; the zero value knows no
// master (each then counts as having replicas).
type ReplicaView struct {
	mu    sync.Mutex
	known bool
	n     map[string]int // master address -> replicas not flagged failing
	kick  chan struct{}
}

// Replicas is how many replicas the master at addr has (-1: not known).
func (v *ReplicaView) Replicas(addr string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n, ok := v.n[addr]
	if !v.known || !ok {
		return -1
	}
	return n
}

// ToWait is how many replicas a write on the master at addr must reach: want, or fewer when
// the view says the master has fewer (0: none to wait for).
func (v *ReplicaView) ToWait(addr string, want int) int {
	if want <= 0 {
		return 0
	}
	if have := v.Replicas(addr); have >= 0 {
		return min(want, have)
	}
	return want
}

// Set replaces the view.
func (v *ReplicaView) Set(n map[string]int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.n, v.known = n, true
}

// kicks is the channel Kick signals and Watch reads.
func (v *ReplicaView) kicks() chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.kick == nil {
		v.kick = make(chan struct{}, 1)
	}
	return v.kick
}

// Kick has Watch read the view now: a failover may be under way (a master's connection
// failed, or a WAIT came back short).
func (v *ReplicaView) Kick() {
	select {
	case v.kicks() <- struct{}{}:
	default:
	}
}

// Watch keeps the view fresh from rc, every every and at once after a Kick, each read bounded
// by timeout, until ctx ends. A read that fails leaves the last view.
func (v *ReplicaView) Watch(ctx context.Context, rc *redis.ClusterClient, every, timeout time.Duration, log *zap.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	kick := v.kicks()
	for {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		n, err := ReadReplicas(rctx, rc)
		cancel()
		if err == nil {
			v.Set(n)
		} else if ctx.Err() == nil && !errors.Is(err, redis.ErrClosed) {
			log.Debug("reading the masters' replicas failed; the last view stands", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
	}
}

// ReadReplicas reads the cluster's view of each master's replicas (CLUSTER SHARDS: the
// replicas it says are online, not failed nor loading); in front of one server, its own count
// of connected replicas (INFO replication).
func ReadReplicas(ctx context.Context, rc *redis.ClusterClient) (map[string]int, error) {
	shards, err := rc.ClusterShards(ctx).Result()
	if err != nil && strings.Contains(err.Error(), "cluster support disabled") {
		return serverReplicas(ctx, rc)
	}
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, sh := range shards {
		master, online := "", 0
		for _, n := range sh.Nodes {
			switch {
			case n.Role == "master":
				host := n.Endpoint
				if host == "" || host == "?" {
					host = n.IP
				}
				master = net.JoinHostPort(host, strconv.FormatInt(n.Port, 10))
			case n.Health == "online":
				online++
			}
		}
		if master != "" {
			out[master] = online
		}
	}
	return out, nil
}

// serverReplicas is each master's connected_slaves, as it counts them.
func serverReplicas(ctx context.Context, rc *redis.ClusterClient) (map[string]int, error) {
	var mu sync.Mutex
	out := map[string]int{}
	err := rc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		_, rest, _ := strings.Cut(info, "connected_slaves:")
		v, _, _ := strings.Cut(rest, "\r\n")
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return errors.New("INFO replication has no connected_slaves")
		}
		mu.Lock()
		defer mu.Unlock()
		out[m.Options().Addr] = n
		return nil
	})
	return out, err
}
