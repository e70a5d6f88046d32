package guard

import (
	"sync"
	"time"

	"seckill-proxy/guard/admit"
	"seckill-proxy/sale"
)

// A buy of a SKU that has no sale is answered "CLOSED not warmed" by the buy script. Without
// a local answer, a client that pipelines buys of made-up SKUs makes one Lua call each, at
// whatever rate it sends: no sale's rate, no sold-out flag and no counters stand in its way.
// noSales remembers, for buy.sold_out_reprobe, the SKUs the script said have no sale, in a
// fixed table, so that the next buys of them are answered with no Redis call. A WARM (here,
// or an event from another proxy) forgets the SKU at once; a missed event costs at most the
// re-probe interval, as for the sold-out flag.

// noSaleSlots is the table's size: memory is fixed (16 bytes a slot, 64 KiB), and a flood of
// distinct made-up SKUs only overwrites itself.
const noSaleSlots = 1 << 12

// noSales is that table: direct-mapped by the SKU's hash. Safe for concurrent use; its zero
// value is ready.
type noSales struct {
	mu    sync.Mutex
	slots [noSaleSlots]struct{ h, until uint64 }
	// gen counts forgets, so that a reply read before a WARM is not remembered after it.
	gen uint64
}

// has reports whether sku was found to have no sale less than the re-probe interval ago.
func (n *noSales) has(sku string, now time.Time) bool {
	h := admit.Hash(sku)
	n.mu.Lock()
	defer n.mu.Unlock()
	s := &n.slots[h%noSaleSlots]
	return s.h == h && uint64(now.UnixNano()) < s.until
}

// generation is the count of forgets so far: take it before asking Redis, and pass it to add.
func (n *noSales) generation() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gen
}

// add remembers sku as having no sale until until, unless a forget came after gen.
func (n *noSales) add(sku string, until time.Time, gen uint64) {
	h := admit.Hash(sku)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.gen == gen {
		n.slots[h%noSaleSlots] = struct{ h, until uint64 }{h, uint64(until.UnixNano())}
	}
}

// forget drops sku: it may have a sale now.
func (n *noSales) forget(sku string) {
	h := admit.Hash(sku)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.gen++
	if s := &n.slots[h%noSaleSlots]; s.h == h {
		*s = struct{ h, until uint64 }{}
	}
}

// admitUnknown is admission for a buy of a SKU with no counters here (no sale seen, no rate
// synced): nil if it may go to Redis. A SKU found to have no sale is answered CLOSED from the
// table; the others spend admission.unknown_sku_rate, past which they are LIMITED rate. A SKU
// with a real sale gets its counters from its first reply, and no longer spends it.
func (g *Guard) admitUnknown(sku string, now time.Time) error {
	if g.noSales.has(sku, now) {
		g.stats.closed.Add(1)
		g.stats.localSoldOut.Add(1)
		g.stats.noSale.Add(1)
		return errNotWarmed
	}
	return g.spendUnknown(now)
}

// spendUnknown spends one of admission.unknown_sku_rate, or answers LIMITED rate past it.
func (g *Guard) spendUnknown(now time.Time) error {
	r := g.adm.unknown.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		g.adm.limitedRate.Add(1)
		g.adm.limitedUnknown.Add(1)
		return NewLimited(LimitedRate, d)
	}
	return nil
}

// statusNoSale is what status.lua answers in place of the buckets for a SKU with no sale and
// no buyer.
const statusNoSale = "!nosale"

// admitStatus is admission for a SECKILL.STATUS (or a wait, or an outcome channel) of sku,
// as admitUnknown is for a buy: a SKU this proxy has counters for (known) goes to Redis; one
// found to have no sale is answered none from the table (none true), with no Redis call; any
// other spends admission.unknown_sku_rate, past which it is LIMITED rate. So made-up SKUs cost
// Redis no more through STATUS than through BUY.
func (g *Guard) admitStatus(sku string, now time.Time) (known, none bool, err error) {
	if _, ok := g.counters(sku); ok {
		return true, false, nil
	}
	if g.noSales.has(sku, now) {
		g.waits.noSale.Add(1)
		return false, true, nil
	}
	if err := g.spendUnknown(now); err != nil {
		g.waits.limited.Add(1)
		return false, false, err
	}
	return false, false, nil
}

// learnStatus takes what a status read of sku (begun at generation gen) said of the sale: no
// sale is remembered for buy.sold_out_reprobe, as a buy's "not warmed" is; a sale that exists
// gets its counters here, so that its next STATUS no longer spends the unknown SKUs' rate.
func (g *Guard) learnStatus(sku string, v []any, gen uint64) {
	if sale.Field(v, 0) == statusNoSale {
		g.noSales.add(sku, g.opt.Now().Add(g.opt.Buy.SoldOutReprobe), gen)
		return
	}
	g.countersFor(sku)
}
