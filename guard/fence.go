package guard

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
)

// A flag is an answer given with no call to Redis (SOLDOUT, CLOSED, and DUPLICATE with the
// buyer's order id from the sold-out sale's buyers), so it may rest only on what a replica
// holds, as every answer of a buy call does (replicawait.go). The reads a flag is set from
// (probe.lua, the buyers' HSCAN) are followed by a fence on each master they were read from:
// the sale's fence key set and deleted, and a WAIT, on one connection of that master. The
// replication stream is one ordered log, so once a replica holds the fence it holds every
// write the reads saw. A master that moved between the reads and the fence answers them
// from elsewhere: the reads went to the master client that was asked, and a node that is no
// longer master refuses both (MOVED).

// errUnfenced refuses a flag whose reads no replica is known to hold: the master has none
// online, and buy.no_replica is not tell.
var errUnfenced = errors.New("the sale's master has no replica online: a flag would rest on a single copy; its buys keep going to Redis")

// fence returns nil once replicas hold everything master m had written when it was called
// (as many as its buys wait for), for the bucket of keys with fence key key; ErrNotKnown if
// they did not acknowledge in time; errUnfenced if m has no replica online and
// buy.no_replica is not tell. With buy.wait_replicas 0 nothing is waited for.
func (g *Guard) fence(ctx context.Context, m *redis.Client, key string) error {
	if g.opt.Buy.WaitReplicas == 0 {
		return nil
	}
	want, timeout := g.ReplicasToWait(m.Options().Addr)
	if want == 0 {
		if g.opt.Buy.NoReplica == conf.NoReplicaTell {
			return nil
		}
		return errUnfenced
	}
	pipe := m.Pipeline() // one connection: the WAIT counts the fence's write
	pipe.Set(ctx, key, "1", 0)
	pipe.Del(ctx, key)
	acked := pipe.Do(ctx, "WAIT", want, timeout.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	if n, err := acked.Int64(); err != nil || n < int64(want) {
		g.shortWait()
		return ErrNotKnown
	}
	return nil
}
