package guard

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/sale"
)

// ErrDrift: the sale sends its orders somewhere else than this proxy would (another Kafka
// topic or message version, recorded by WARM in the sale's route). The proxy sells none of
// its orders, for no sink might read them; the error names the difference. Fix the proxy's
// configuration, or re-warm the sale (FORCE) from a proxy with the route wanted.
var ErrDrift = errors.New("DRIFT")

// driftLogEvery bounds the drift log lines to one per SKU per interval.
const driftLogEvery = 10 * time.Second

// driftLog remembers when each SKU's drift was last logged. It holds only SKUs whose sales
// exist (the script said DRIFT), and is cleared whole past driftLogMax.
type driftLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

const driftLogMax = 4096

// drifted counts and answers a buy or release that the script refused with DRIFT, and logs
// it (at most once per SKU every driftLogEvery).
func (g *Guard) drifted(sku, saleRoute string) error {
	g.stats.drift.Add(1)
	diff := sale.RouteDiff(saleRoute, g.opt.Route)
	now := time.Now()
	d := &g.driftLog
	d.mu.Lock()
	if d.last == nil || len(d.last) >= driftLogMax {
		d.last = map[string]time.Time{}
	}
	logIt := now.Sub(d.last[sku]) >= driftLogEvery
	if logIt {
		d.last[sku] = now
	}
	d.mu.Unlock()
	if logIt {
		g.log.Error("this proxy's configuration differs from its sale's: its buys are refused (DRIFT)",
			zap.String("sku", sku), zap.String("sale_route", saleRoute), zap.String("proxy_route", g.opt.Route),
			zap.String("difference", diff))
	}
	return fmt.Errorf("%w sale %s sends its orders to %s, this proxy to %s: %s; fix this proxy's kafka settings, or re-warm the sale with FORCE",
		ErrDrift, sku, saleRoute, g.opt.Route, diff)
}
