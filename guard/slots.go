package guard

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// After a master dies, go-redis's slot map may come from a node that has not seen the
// promotion, and name the dead master for another reload interval. ReloadSlots reloads until
// the map's masters are the best informed view's (Options.Topology, asked of several nodes),
// so that the proxy leaves the dead node as soon as the cluster has.

// slotsRefresh bounds one refresh: its rounds, and the wait between them.
const (
	slotsRefreshRounds = 25
	slotsRefreshWait   = 200 * time.Millisecond
)

// ReloadSlots has the slot map reloaded now (in the background), as after a failover: an event
// loop's connection to a master failed, or a buy's call did on its connection. With a
// Topology it reloads until the map agrees with it (at most about 5 s); one refresh runs at
// a time.
func (g *Guard) ReloadSlots() {
	g.rc.ReloadState(context.Background())
	g.replicaView.Kick()
	if g.opt.Topology == nil || !g.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() { // not one of g.workers: it may start while Close waits for them
		defer g.refreshing.Store(false)
		for range slotsRefreshRounds {
			select {
			case <-g.ctx.Done():
				return
			case <-time.After(slotsRefreshWait):
			}
			ctx, cancel := context.WithTimeout(g.ctx, g.opt.Buy.CallTimeout)
			want, err := g.opt.Topology(ctx)
			have := g.masters(ctx)
			cancel()
			if err == nil && slices.Equal(want, have) {
				return
			}
			if err == nil {
				g.log.Debug("slot map behind the cluster's; reloading", zap.Strings("map", have), zap.Strings("cluster", want))
			}
			g.rc.ReloadState(context.Background())
		}
	}()
}

// masters are the addresses of the masters in go-redis's slot map now, sorted.
func (g *Guard) masters(ctx context.Context) []string {
	var mu sync.Mutex
	var out []string
	_ = g.rc.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, m.Options().Addr)
		return nil
	})
	slices.Sort(out)
	return out
}
