package guard

import (
	"sync"
	"time"
)

// recentSales are the SKUs this proxy answered buys of lately, with the second of the last:
// what the background work that follows the buys (admission's rate reads, the sale figures)
// walks, rather than every sale the proxy ever heard of. The buy path writes a SKU at most
// once a second (touch: an atomic load per buy otherwise).
type recentSales struct {
	mu   sync.Mutex
	last map[string]int64 // sku -> Unix second of its last buy here
}

// touch records a buy of sku (counters c) at now.
func (g *Guard) touch(sku string, c *skuCounters, now time.Time) {
	sec := now.Unix()
	if c.active.Load() == sec || c.active.Swap(sec) == sec {
		return
	}
	g.recent.mu.Lock()
	if g.recent.last == nil {
		g.recent.last = map[string]int64{}
	}
	g.recent.last[sku] = sec
	g.recent.mu.Unlock()
}

// recentSince lists the SKUs bought here at or after since (and this proxy still holds),
// and forgets those bought before forget.
func (g *Guard) recentSince(since, forget time.Time) []string {
	s, f := since.Unix(), forget.Unix()
	var held map[string]*skuCounters
	if p := g.perSKU.Load(); p != nil {
		held = *p
	}
	g.recent.mu.Lock()
	defer g.recent.mu.Unlock()
	var out []string
	for sku, sec := range g.recent.last {
		if _, ok := held[sku]; !ok || sec < f {
			delete(g.recent.last, sku)
			continue
		}
		if sec >= s {
			out = append(out, sku)
		}
	}
	return out
}
