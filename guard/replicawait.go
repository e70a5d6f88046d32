package guard

import (
	"context"
	"errors"
	"strconv"
	"time"

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
// WAIT is skipped only on a master that has no replica in the cluster's view
// (connect.ReplicaView, refreshed every replicaRefresh): the replica just promoted after its
// master died, until a new one joins. Never because a WAIT timed out: that is exactly what a
// stale master's WAIT does.

// replicaRefresh is how often the guard reads which masters have replicas; a failed
// connection to a master (ReloadSlots) has it read at once too.
const replicaRefresh = time.Second

// ErrNotKnown answers a buy whose script ran on a master that no replica acknowledged.
var ErrNotKnown = errors.New("the outcome is not known: no replica acknowledged the buy in buy.wait_timeout (a master failing over, paused or cut off); send the same buy again: it answers DUPLICATE with the order if there is one")

// watchReplicas keeps the replica view fresh until ctx ends.
func (g *Guard) watchReplicas(ctx context.Context) {
	if g.opt.Buy.WaitReplicas > 0 {
		g.replicaView.Watch(ctx, g.lc, replicaRefresh, g.opt.Buy.CallTimeout, g.log)
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
	n := g.replicaView.ToWait(addr, g.opt.Buy.WaitReplicas)
	if n == 0 {
		return 0, 0
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
	g.replicaView.Kick()
}
