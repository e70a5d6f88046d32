package guard

import (
	"context"
	"maps"

	"go.uber.org/zap"

	"seckill-proxy/sale"
)

// Retired is the sweeper's word that sku's sale is over and drained and left the set of
// sales: this proxy forgets it (its counters, rate, version, layout and flags), and tells the
// other proxies to, so that a proxy's memory follows the open sales, not every sale it ever
// served. A buy of it afterwards is a buy of a SKU this proxy knows nothing of, which Redis
// answers (closed, or not warmed); a WARM makes it known again.
func (g *Guard) Retired(sku string) {
	g.forget(sku)
	g.signal(eventRetire, sku)
}

// forget drops what this proxy holds of sku's sale.
func (g *Guard) forget(sku string) {
	g.setRate(sku, 0, 0)
	g.perSKUMu.Lock()
	if m := g.perSKU.Load(); m != nil {
		if _, ok := (*m)[sku]; ok {
			next := maps.Clone(*m)
			delete(next, sku)
			g.perSKU.Store(&next)
		}
	}
	g.perSKUMu.Unlock()
	g.versions.Delete(sku)
	g.layouts.Delete(sku)
	g.flags.Clear(sku)
}

// forgetIfRetired acts on another proxy's retire event: an event is a hint, so the sale is
// forgotten only if it is out of the set of sales.
func (g *Guard) forgetIfRetired(ctx context.Context, sku string) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	in, err := g.rc.SIsMember(ctx, sale.SalesKey, sku).Result()
	switch {
	case err != nil:
		g.stats.eventsIgnored.Add(1)
		g.log.Warn("could not check a retire event against Redis; ignoring it", zap.String("sku", sku), zap.Error(err))
	case in:
		g.stats.eventsIgnored.Add(1) // warmed again meanwhile
	default:
		g.forget(sku)
	}
}
