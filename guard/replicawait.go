package guard

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"seckill-proxy/internal/resp"
)

// "Bought" is final: an order id is given only for a decrement that a replica holds
// (buy.wait_replicas, 1 by default), so that a failover, or a master paused or cut off past
// the node timeout, loses none that a buyer was told of. The buy scripts of a turn are
// followed, on the same connection, by WAIT n <buy.wait_timeout>, and their replies are
// settled once WAIT answers:
//
//   - WAIT counted n replicas: every reply stands, and what was sold goes to Kafka.
//   - Fewer: the master may be a stale one, paused past the node timeout while its replica was
//     promoted, whose late writes the promoted one never sees. No reply of the call is told
//     (ErrNotKnown: UNAVAILABLE, the outcome is not known), nothing is teed, and no local
//     state (sold-out flags, known buyers) is taken from it. An order it wrote stays in that
//     master's outbox: if the master was sound after all (a slow replica), the sweeper
//     publishes it once a replica holds it (outbox.Sweeper fences each read the same way),
//     and the buyer's retry answers DUPLICATE with it; if the master was stale, the entry
//     vanishes with its writes when it rejoins as a replica, and the retry is a fresh buy.
//
// WAIT is skipped only on a master that has no replica in the cluster's view (the replicas
// CLUSTER SHARDS says are online, refreshed every replicaRefresh): the
// replica just promoted after its master died, until a new one joins. Never because a WAIT
// timed out: that is exactly what a stale master's WAIT does.

// replicaRefresh is how often the guard reads which masters have replicas; a failed
// connection to a master (ReloadSlots) has it read at once too.
const replicaRefresh = time.Second

// ErrNotKnown answers a buy whose script ran on a master that no replica acknowledged.
var ErrNotKnown = errors.New("the outcome is not known: no replica acknowledged the buy in buy.wait_timeout (a master failing over, paused or cut off); send the same buy again: it answers DUPLICATE with the order if there is one")

// replicaView is the number of replicas each master has in the cluster's view. Safe for
// concurrent use; the zero value knows no master (each then counts as having replicas).
type replicaView struct {
	mu    sync.Mutex
	known bool
	n     map[string]int // master address -> replicas not flagged failing
}

// replicas is how many replicas the master at addr has (-1: not known).
func (v *replicaView) replicas(addr string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n, ok := v.n[addr]
	if !v.known || !ok {
		return -1
	}
	return n
}

func (v *replicaView) set(n map[string]int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.n, v.known = n, true
}

// readReplicas reads the cluster's view of each master's replicas (CLUSTER SHARDS: the
// replicas it says are online, not failed nor loading); in front of one server, its own count
// of connected replicas (INFO replication).
func (g *Guard) readReplicas(ctx context.Context) (map[string]int, error) {
	shards, err := g.lc.ClusterShards(ctx).Result()
	if err != nil && strings.Contains(err.Error(), "cluster support disabled") {
		return g.serverReplicas(ctx)
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
func (g *Guard) serverReplicas(ctx context.Context) (map[string]int, error) {
	var mu sync.Mutex
	out := map[string]int{}
	err := g.lc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
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

// watchReplicas keeps the replica view fresh, every replicaRefresh, until ctx ends.
func (g *Guard) watchReplicas(ctx context.Context) {
	if g.opt.Buy.WaitReplicas <= 0 {
		return
	}
	t := time.NewTicker(replicaRefresh)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
		n, err := g.readReplicas(rctx)
		cancel()
		if err == nil {
			g.replicaView.set(n)
		} else if ctx.Err() == nil && !errors.Is(err, redis.ErrClosed) {
			g.log.Debug("reading the masters' replicas failed; the last view stands")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-g.replicaKick: // a master's connection failed: a failover may be under way
		}
	}
}

// kickReplicas has the replica view read now: a failover may be under way.
func (g *Guard) kickReplicas() {
	select {
	case g.replicaKick <- struct{}{}:
	default:
	}
}

// WaitCommand is the WAIT that follows the script calls to the master at addr, and how many
// replicas it asks for: buy.wait_replicas, or fewer if the master has fewer in the cluster's
// view; nil when none is configured, or the master has no replica.
func (g *Guard) WaitCommand(addr string) ([]byte, int) {
	n, _ := g.ReplicasToWait(addr)
	if n == 0 {
		if g.opt.Buy.WaitReplicas > 0 {
			g.stats.waitOff.Add(1)
		}
		return nil, 0
	}
	b := redcon.AppendArray(nil, 3)
	b = redcon.AppendBulkString(b, "WAIT")
	b = redcon.AppendBulkString(b, strconv.Itoa(n))
	return redcon.AppendBulkString(b, strconv.FormatInt(g.opt.Buy.WaitFor().Milliseconds(), 10)), n
}

// ReplicasToWait is how many replicas a write on the master at addr must reach before what it
// wrote may leave Redis (0: none to wait for), and how long to wait: see WaitCommand. The
// sweeper fences its reads of the outboxes with it.
func (g *Guard) ReplicasToWait(addr string) (int, time.Duration) {
	n := g.opt.Buy.WaitReplicas
	if n <= 0 {
		return 0, 0
	}
	if have := g.replicaView.replicas(addr); have >= 0 {
		n = min(n, have)
	}
	return n, g.opt.Buy.WaitFor()
}

// WaitReply takes the reply of a WAIT that asked for want replicas: whether they
// acknowledged (if not, the calls before it are not known; see ErrNotKnown).
func (g *Guard) WaitReply(raw []byte, want int) bool {
	v, err := resp.Decode(raw)
	n, ok := v.(int64)
	if err != nil || !ok {
		n = -1
	}
	if n < int64(want) {
		g.shortWait()
		return false
	}
	return true
}

// shortWait counts a WAIT that came back short, and has the replica view read at once: the
// master may be the replica just promoted, which has none until its old master rejoins, and
// the view then says so within a read rather than a second.
func (g *Guard) shortWait() {
	g.stats.waitShort.Add(1)
	g.kickReplicas()
}
