package guard

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"seckill-proxy/sale"
)

// SECKILL.CHECK: a sale's Redis side against MySQL.

// Check reconciles sku's sale in Redis with MySQL (invariant I5) and changes nothing. It
// returns no differences when they agree; otherwise one line per difference with both
// numbers:
//   - remaining stock: Redis's, plus the units of orders still in flight (sold in Redis, no
//     outcome from the sink yet), against MySQL's;
//   - buyers: Redis's buyers less those in flight and those MySQL rejected, against MySQL's
//     confirmed orders of this sale;
//   - the outbox backlog, against 0;
//   - orders that Redis sold and MySQL rejected (Redis's stock was above MySQL's: a hand-made
//     SET, or a decrement lost in a failover), against none, then each of them (at most
//     maxCheckOrders);
//   - outbox entries moved to the dead-letter stream because no one could read them;
//   - late orders: sold Options.LateAfter ago or more with no outcome from the sink, against
//     none, then each of them (at most maxCheckOrders), oldest first;
//   - the sale's route (where its orders go), against this proxy's.
func (g *Guard) Check(ctx context.Context, sku string) ([]string, error) {
	if g.db == nil {
		return nil, badArgs("CHECK needs MySQL, and this proxy has no database configured")
	}
	ctx, cancel := context.WithTimeout(ctx, warmTimeoutFactor*g.opt.Buy.CallTimeout)
	defer cancel()
	st, err := g.readSale(ctx, sku, true)
	if err != nil {
		return nil, err
	}
	now, err := g.rc.Time(ctx).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	var active, inFlight, inFlightQty, rejected int64
	var rejections []string
	for uid, v := range st.all {
		if strings.HasPrefix(v, "released:") || strings.HasPrefix(v, "r:") {
			continue // released, or a reservation (st.reserved counts them)
		}
		active++
		id, qty, _ := strings.Cut(v, ":")
		q, _ := strconv.ParseInt(qty, 10, 64)
		switch outcome := st.results[id]; {
		case outcome == "":
			inFlight++
			inFlightQty += q
		case strings.HasPrefix(outcome, "rejected"):
			rejected++
			rejections = append(rejections, fmt.Sprintf("rejected order %s: uid %s qty %d, %s", id, uid, q,
				strings.TrimPrefix(outcome, "rejected ")))
		}
	}
	first := metaInt(st.meta, "first_version")
	if first == 0 {
		first = metaInt(st.meta, "version")
	}
	var mysqlStock, confirmed int64
	if err := g.db.QueryRowContext(ctx, `SELECT stock FROM seckill_stock WHERE sku = ?`, sku).Scan(&mysqlStock); err != nil {
		return nil, unavailable(fmt.Errorf("mysql: %w", err))
	}
	if err := g.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM seckill_orders WHERE sku = ? AND sale_version >= ? AND status = 'confirmed'`,
		sku, first).Scan(&confirmed); err != nil {
		return nil, unavailable(fmt.Errorf("mysql: %w", err))
	}
	var diffs []string
	if st.stock+inFlightQty != mysqlStock {
		diffs = append(diffs, fmt.Sprintf("remaining stock: redis %d + %d in flight = %d, mysql %d",
			st.stock, inFlightQty, st.stock+inFlightQty, mysqlStock))
	}
	if settled := active - inFlight - rejected; settled != confirmed {
		diffs = append(diffs, fmt.Sprintf("buyers: redis %d (%d in flight, %d rejected) = %d settled, mysql %d confirmed",
			active, inFlight, rejected, settled, confirmed))
	}
	if st.outbox != 0 {
		diffs = append(diffs, fmt.Sprintf("outbox backlog: redis %d, want 0", st.outbox))
	}
	if st.reserved != 0 {
		diffs = append(diffs, fmt.Sprintf("reservations: %d buyers reserved while a donor bucket is asked, want 0 (the sweeper settles any left %s)", st.reserved, g.settleAge()))
	}
	if dead := metaInt(st.meta, "dead"); dead > 0 {
		diffs = append(diffs, fmt.Sprintf("dead letters: %d unreadable outbox entries moved to %s", dead, deadKeys(st.layout)))
	}
	if rejected > 0 {
		diffs = append(diffs, fmt.Sprintf("rejected orders: %d sold in Redis that MySQL refused", rejected))
		slices.Sort(rejections)
		if len(rejections) > maxCheckOrders {
			rejections = append(rejections[:maxCheckOrders], fmt.Sprintf("... and %d more rejected orders", len(rejections)-maxCheckOrders))
		}
		diffs = append(diffs, rejections...)
	}
	if late := g.lateOrders(st, now); len(late) > 0 {
		diffs = append(diffs, fmt.Sprintf("late orders: %d sold %s ago or more with no outcome from the sink, want none", len(late), g.opt.LateAfter))
		for _, o := range late[:min(len(late), maxCheckOrders)] {
			diffs = append(diffs, o.String())
		}
		if len(late) > maxCheckOrders {
			diffs = append(diffs, fmt.Sprintf("... and %d more late orders", len(late)-maxCheckOrders))
		}
	}
	if r := st.meta["route"]; !sale.RouteAccepts(r, g.opt.Route) {
		diffs = append(diffs, fmt.Sprintf("route: the sale sends its orders to %s, this proxy to %s (%s): this proxy's buys are refused", r, g.opt.Route, sale.RouteDiff(r, g.opt.Route)))
	}
	return diffs, nil
}

// deadKeys names the dead-letter streams of l's buckets.
func deadKeys(l sale.Layout) string {
	names := make([]string, l.K())
	for i := range l.Tags {
		names[i] = l.Keys(i).Dead
	}
	return strings.Join(names, ", ")
}
