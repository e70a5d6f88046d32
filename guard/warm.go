package guard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"go.uber.org/zap"

	"seckill-proxy/sale"
)

// ErrNoItem: the SKU has no row in seckill_items. The proxy never invents stock.
var ErrNoItem = fmt.Errorf("%w no such item", ErrBadArgs)

// Warmed is what a WARM did.
type Warmed struct {
	Version int64
	Stock   int64
	// InFlight is the units sold in Redis and not yet in MySQL, which the stock leaves out.
	InFlight int64
}

// warmTimeoutFactor times buy.call_timeout bounds a whole WARM: a few MySQL and Redis calls.
const warmTimeoutFactor = 5

// Warm loads sku's sale from MySQL into Redis: it reads the item, marks it warming in MySQL
// under a new sale version, writes stock and meta to Redis in one script, checks that Redis
// stock is not above MySQL stock, and marks the sale open in Redis and MySQL. An open sale
// (or one mid-warm) is re-warmed only with Force. The stock is MySQL's less the units in
// flight (sold in Redis, not yet in MySQL), counted as CHECK counts them.
func (g *Guard) Warm(ctx context.Context, sku string, opt WarmOptions) (Warmed, error) {
	if g.db == nil {
		return Warmed{}, badArgs("WARM needs MySQL, and this proxy has no database configured")
	}
	ctx, cancel := context.WithTimeout(ctx, warmTimeoutFactor*g.opt.Buy.CallTimeout)
	defer cancel()
	keys := sale.KeysFor(sku).ScriptKeys()

	var stock, version int64
	var status string
	err := g.db.QueryRowContext(ctx, `SELECT stock, status, sale_version FROM seckill_items WHERE sku = ?`, sku).
		Scan(&stock, &status, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return Warmed{}, fmt.Errorf("%w: %s is not in seckill_items", ErrNoItem, sku)
	}
	if err != nil {
		return Warmed{}, unavailable(fmt.Errorf("mysql: %w", err))
	}
	if (status == sale.StateOpen || status == sale.StateWarming) && !opt.Force {
		return Warmed{}, badArgs("sale %s is %s (version %d); add FORCE to re-warm it", sku, status, version)
	}
	next := version + 1
	r, err := g.db.ExecContext(ctx, `UPDATE seckill_items SET status = ?, sale_version = ? WHERE sku = ? AND sale_version = ?`,
		sale.StateWarming, next, sku, version)
	if err != nil {
		return Warmed{}, unavailable(fmt.Errorf("mysql: %w", err))
	}
	if n, _ := r.RowsAffected(); n != 1 {
		return Warmed{}, badArgs("sale %s was warmed by someone else at the same time; try again", sku)
	}

	// Register the sale first, so that its outbox is swept even if this warm stops half way.
	if err := g.rc.SAdd(ctx, sale.SalesKey, sku).Err(); err != nil {
		return Warmed{}, g.abortWarm(sku, next, status, unavailable(err))
	}
	force := "0"
	if opt.Force {
		force = "1"
	}
	reply, err := warmScript.Run(ctx, g.rc, keys, next, stock, opt.StartMs, opt.EndMs, opt.Limit, force, opt.Rate, opt.Burst, g.opt.Route).Slice()
	if err != nil {
		return Warmed{}, g.abortWarm(sku, next, status, unavailable(err))
	}
	var inflight int64
	switch code, arg := sale.Field(reply, 0), sale.Field(reply, 1); code {
	case "OK":
		inflight, _ = strconv.ParseInt(sale.Field(reply, 2), 10, 64)
	case "OPEN":
		return Warmed{}, g.abortWarm(sku, next, status, badArgs("sale %s is open in Redis (version %s); add FORCE to re-warm it", sku, arg))
	case "ENDED":
		return Warmed{}, g.abortWarm(sku, next, status, badArgs("END %d is not after Redis's clock (%s ms): the sale would be over before it opens", opt.EndMs, arg))
	case "STALE":
		return Warmed{}, g.abortWarm(sku, next, status, badArgs("sale %s has version %s in Redis, ahead of MySQL's %d; repair seckill_items.sale_version", sku, arg, next))
	default:
		return Warmed{}, g.abortWarm(sku, next, status, unavailable(fmt.Errorf("unexpected warm reply %q", code)))
	}

	// Redis stock must not be above MySQL's, read after the script: an order that the sink
	// stored between MySQL's read and the script, and so was not counted in flight, shows here.
	var redisStock, mysqlStock int64
	if redisStock, err = g.rc.Get(ctx, sale.KeysFor(sku).Stock).Int64(); err != nil {
		return Warmed{}, unavailable(err)
	}
	if err = g.db.QueryRowContext(ctx, `SELECT stock FROM seckill_items WHERE sku = ?`, sku).Scan(&mysqlStock); err != nil {
		return Warmed{}, unavailable(fmt.Errorf("mysql: %w", err))
	}
	if redisStock > mysqlStock {
		// Close the half-made sale on both sides; a failure here leaves it "warming", which
		// no buy accepts, so it is logged and the refusal still returned.
		if err := transitionScript.Run(ctx, g.rc, keys, next, sale.StateWarming, sale.StateClosed).Err(); err != nil {
			g.log.Error("warm: could not close the refused sale in Redis", zap.String("sku", sku), zap.Error(err))
		}
		if _, err := g.db.ExecContext(ctx, `UPDATE seckill_items SET status = ? WHERE sku = ? AND sale_version = ?`, sale.StateClosed, sku, next); err != nil {
			g.log.Error("warm: could not close the refused sale in MySQL", zap.String("sku", sku), zap.Error(err))
		}
		return Warmed{}, badArgs("sale %s not opened: Redis stock %d is above MySQL stock %d", sku, redisStock, mysqlStock)
	}

	moved, err := transitionScript.Run(ctx, g.rc, keys, next, sale.StateWarming, sale.StateOpen).Int()
	if err != nil {
		return Warmed{}, unavailable(err)
	}
	if moved != 1 {
		return Warmed{}, badArgs("sale %s changed while it was being warmed; try again", sku)
	}
	if _, err := g.db.ExecContext(ctx, `UPDATE seckill_items SET status = ? WHERE sku = ? AND sale_version = ?`, sale.StateOpen, sku, next); err != nil {
		return Warmed{}, unavailable(fmt.Errorf("mysql: sale is open in Redis but not marked open: %w", err))
	}
	g.versions.Store(sku, strconv.FormatInt(next, 10))
	g.clearFlag(sku)
	g.countersFor(sku) // a sale now: its buys need not spend admission.unknown_sku_rate
	g.setRate(sku, opt.Rate, opt.Burst)
	g.signal(eventWarm, sku)
	g.log.Info("sale warmed", zap.String("sku", sku), zap.Int64("version", next), zap.Int64("stock", redisStock),
		zap.Int64("mysql_stock", stock), zap.Int64("units_in_flight", inflight),
		zap.Int64("start_ms", opt.StartMs), zap.Int64("end_ms", opt.EndMs), zap.Int64("limit", opt.Limit), zap.Int64("rate", opt.Rate), zap.Int64("burst", opt.Burst), zap.Bool("force", opt.Force))
	return Warmed{Version: next, Stock: redisStock, InFlight: inflight}, nil
}

// abortWarm puts the MySQL row back to the state it had when the warm did not reach Redis.
func (g *Guard) abortWarm(sku string, version int64, prev string, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), g.opt.Buy.CallTimeout)
	defer cancel()
	if _, err := g.db.ExecContext(ctx, `UPDATE seckill_items SET status = ? WHERE sku = ? AND sale_version = ?`, prev, sku, version); err != nil {
		g.log.Error("warm: could not restore the item's status", zap.String("sku", sku), zap.String("status", prev), zap.Error(err))
	}
	return cause
}
