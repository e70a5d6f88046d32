package guard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/conf"
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
// view; nil when none is configured (0), or the master has no replica online (-1: its calls'
// buys go as buy.no_replica says, NoReplica).
func (g *Guard) WaitCommand(addr string) ([]byte, int) {
	n, _ := g.ReplicasToWait(addr)
	if n == 0 {
		if g.opt.Buy.WaitReplicas > 0 {
			g.stats.waitOff.Add(1)
			return nil, -1
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

// ErrNoReplica refuses a buy on a master with no replica online (buy.no_replica: refuse).
// With ErrNoCopy, the buy did not run: its UNAVAILABLE says so.
var ErrNoReplica = errors.New("its master has no replica online to hold the buy, and buy.no_replica is refuse; the buy did not run: send it again once a replica is back")

// NoReplica takes the attempts of calls to a master with no replica online, as buy.no_replica
// says: kafka marks them to be answered once Kafka holds their orders; tell marks them to be
// counted as told with one copy; refuse returns ErrNoReplica, and they go nowhere.
func (g *Guard) NoReplica(as []*Attempt) error {
	switch g.opt.Buy.NoReplica {
	case conf.NoReplicaRefuse:
		g.stats.refusedNoReplica.Add(int64(len(as)))
		return ErrNoReplica
	case conf.NoReplicaTell:
		for _, a := range as {
			a.noReplica = noReplicaTell
		}
	default:
		if g.opt.Publisher == nil || !g.opt.Publisher.Healthy() {
			g.stats.refusedNoReplica.Add(int64(len(as)))
			return ErrNoCopy
		}
		for _, a := range as {
			a.noReplica = noReplicaKafka
		}
	}
	return nil
}

// ErrNoCopy refuses a buy on a master with no replica online while Kafka, its second copy
// (buy.no_replica kafka), is not taking orders.
var ErrNoCopy = errors.New("its master has no replica online and Kafka is not taking orders: nothing could hold the buy twice; the buy did not run: send it again shortly")

// How an attempt on a master with no replica online is answered (Attempt.noReplica).
const (
	noReplicaNone  uint8 = iota // the master has a replica, or none is waited for
	noReplicaKafka              // told once Kafka holds the order
	noReplicaTell               // told at once, and counted
)

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

// heldOnce is the answer to a buy on a master with no replica online (buy.no_replica kafka)
// whose script named an order it did not sell (DUPLICATE): that order may be held once yet,
// in the master alone, so it is not told; its buyer learns it from SECKILL.STATUS once the
// sink has it, or from a retry once a replica holds it.
func (g *Guard) heldOnce(res BuyResult) BuyResult {
	var d *DuplicateError
	if !errors.As(res.Err, &d) {
		return res
	}
	g.stats.unavailable.Add(1)
	return BuyResult{Err: notKnown(fmt.Errorf("order %s of this buyer's is held by its master alone (no replica online) and may not be in Kafka yet", d.OrderID))}
}
