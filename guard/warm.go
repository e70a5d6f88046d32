package guard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
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
	// Buckets is the sale's stock buckets' tag numbers ({0}: not split).
	Buckets []int
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

	var version int64
	var status string
	err := g.db.QueryRowContext(ctx, `SELECT status, sale_version FROM seckill_items WHERE sku = ?`, sku).
		Scan(&status, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return Warmed{}, fmt.Errorf("%w: %s is not in seckill_items", ErrNoItem, sku)
	}
	if err != nil {
		return Warmed{}, unavailable(fmt.Errorf("mysql: %w", err))
	}
	if (status == sale.StateOpen || status == sale.StateWarming) && !opt.Force {
		return Warmed{}, badArgs("sale %s is %s (version %d); add FORCE to re-warm it", sku, status, version)
	}
	lay, kept, err := g.warmLayout(ctx, sku, opt)
	if err != nil {
		return Warmed{}, err
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
	// Each bucket takes its share of MySQL's stock, less its own units in flight; bucket 0,
	// whose meta every proxy reads first, is written first and decides OPEN, ENDED and STALE.
	shares, stock, err := g.splitMySQL(ctx, sku, lay, kept)
	if err != nil {
		return Warmed{}, g.abortWarm(sku, next, status, unavailable(fmt.Errorf("mysql: %w", err)))
	}
	inflight, err := g.warmBuckets(ctx, sku, lay, next, status, shares, opt)
	if err != nil {
		return Warmed{}, err
	}
	redisStock, err := g.checkWarmStock(ctx, sku, lay, next)
	if err != nil {
		return Warmed{}, err
	}
	// Bucket 0 opens last: a buy that finds it open finds every bucket open.
	for b := lay.K() - 1; b >= 0; b-- {
		moved, err := transitionScript.Run(ctx, g.rc, lay.Keys(b).ScriptKeys(), next, sale.StateWarming, sale.StateOpen).Int()
		if err != nil {
			return Warmed{}, unavailable(err)
		}
		if moved != 1 {
			return Warmed{}, badArgs("sale %s changed while it was being warmed; try again", sku)
		}
	}
	// Register it again, now that its meta says open: a sweeper that found it over (no meta
	// yet, or the sale before it closed) and took it out of the set meanwhile must not leave
	// an open sale's outbox unswept (the sweeper asks again after its SREM too).
	if err := g.rc.SAdd(ctx, sale.SalesKey, sku).Err(); err != nil {
		return Warmed{}, unavailable(err)
	}
	if _, err := g.db.ExecContext(ctx, `UPDATE seckill_items SET status = ? WHERE sku = ? AND sale_version = ?`, sale.StateOpen, sku, next); err != nil {
		return Warmed{}, unavailable(fmt.Errorf("mysql: sale is open in Redis but not marked open: %w", err))
	}
	ver := strconv.FormatInt(next, 10)
	g.learnLayout(sku, ver, sale.FormatBuckets(lay.Tags))
	g.versions.Store(sku, ver)
	g.clearFlag(sku)
	g.countersFor(sku) // a sale now: its buys need not spend admission.unknown_sku_rate
	g.setRate(sku, opt.Rate, opt.Burst)
	g.learnLimit(sku, ver, max(opt.Limit, 1))
	g.signal(eventWarm, sku)
	g.log.Info("sale warmed", zap.String("sku", sku), zap.Int64("version", next), zap.Int64("stock", redisStock),
		zap.Int64("mysql_stock", stock), zap.Int64("units_in_flight", inflight), zap.Ints("buckets", lay.Tags),
		zap.Int64("start_ms", opt.StartMs), zap.Int64("end_ms", opt.EndMs), zap.Int64("limit", opt.Limit), zap.Int64("rate", opt.Rate), zap.Int64("burst", opt.Burst), zap.Bool("force", opt.Force))
	return Warmed{Version: next, Stock: redisStock, InFlight: inflight, Buckets: lay.Tags}, nil
}

// warmBuckets writes each bucket's share of the stock and the sale's meta (warm.lua), bucket 0
// first, and returns the units in flight it counted.
func (g *Guard) warmBuckets(ctx context.Context, sku string, lay sale.Layout, next int64, status string, shares []int64, opt WarmOptions) (int64, error) {
	force := "0"
	if opt.Force {
		force = "1"
	}
	var inflight int64
	route := g.opt.Route
	if lay.K() > 1 {
		route = sale.SplitRoute(route)
	}
	for b := range lay.Tags {
		reply, err := warmScript.Run(ctx, g.rc, lay.Keys(b).ScriptKeys(), next, shares[b], opt.StartMs, opt.EndMs, opt.Limit, force,
			opt.Rate, opt.Burst, route, sale.FormatBuckets(lay.Tags)).Slice()
		if err != nil {
			return 0, g.abortWarm(sku, next, status, unavailable(err))
		}
		code, arg := sale.Field(reply, 0), sale.Field(reply, 1)
		if code == "OK" {
			n, _ := strconv.ParseInt(sale.Field(reply, 2), 10, 64)
			inflight += n
			continue
		}
		if b > 0 {
			return 0, g.abortWarm(sku, next, status, unavailable(fmt.Errorf("bucket %d of sale %s answered the warm with %s %s", lay.Tags[b], sku, code, arg)))
		}
		if err := g.warmRefused(sku, next, status, code, arg, opt); err != nil {
			return 0, err
		}
	}
	return inflight, nil
}

// checkWarmStock returns Redis's stock of the warmed sale, which must not be above MySQL's,
// read after the script: an order that the sink stored between MySQL's read and the script,
// and so was not counted in flight, shows here. Above it, the half-made sale is closed.
func (g *Guard) checkWarmStock(ctx context.Context, sku string, lay sale.Layout, next int64) (int64, error) {
	var redisStock, mysqlStock int64
	pipe := g.rc.Pipeline()
	stocks := make([]*redis.StringCmd, lay.K())
	for b := range lay.Tags {
		stocks[b] = pipe.Get(ctx, lay.Keys(b).Stock)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, unavailable(err)
	}
	for _, c := range stocks {
		n, _ := c.Int64()
		redisStock += n
	}
	if err := g.db.QueryRowContext(ctx, `SELECT stock FROM seckill_stock WHERE sku = ?`, sku).Scan(&mysqlStock); err != nil {
		return 0, unavailable(fmt.Errorf("mysql: %w", err))
	}
	if redisStock <= mysqlStock {
		return redisStock, nil
	}
	// Close the half-made sale on both sides; a failure here leaves it "warming", which no
	// buy accepts, so it is logged and the refusal still returned.
	for b := range lay.Tags {
		if err := transitionScript.Run(ctx, g.rc, lay.Keys(b).ScriptKeys(), next, sale.StateWarming, sale.StateClosed).Err(); err != nil {
			g.log.Error("warm: could not close the refused sale in Redis", zap.String("sku", sku), zap.Error(err))
		}
	}
	if _, err := g.db.ExecContext(ctx, `UPDATE seckill_items SET status = ? WHERE sku = ? AND sale_version = ?`, sale.StateClosed, sku, next); err != nil {
		g.log.Error("warm: could not close the refused sale in MySQL", zap.String("sku", sku), zap.Error(err))
	}
	return 0, badArgs("sale %s not opened: Redis stock %d is above MySQL stock %d", sku, redisStock, mysqlStock)
}

// warmRefused is the error for bucket 0's refusal of a warm (code, arg: warm.lua's reply).
func (g *Guard) warmRefused(sku string, next int64, status, code, arg string, opt WarmOptions) error {
	switch code {
	case "OPEN":
		return g.abortWarm(sku, next, status, badArgs("sale %s is open in Redis (version %s); add FORCE to re-warm it", sku, arg))
	case "ENDED":
		return g.abortWarm(sku, next, status, badArgs("END %d is not after Redis's clock (%s ms): the sale would be over before it opens", opt.EndMs, arg))
	case "STALE":
		return g.abortWarm(sku, next, status, badArgs("sale %s has version %s in Redis, ahead of MySQL's %d; repair seckill_items.sale_version", sku, arg, next))
	default:
		return g.abortWarm(sku, next, status, unavailable(fmt.Errorf("unexpected warm reply %q", code)))
	}
}

// warmLayout is the layout a warm of sku writes: a forced re-warm of a sale open (or mid-warm)
// in Redis keeps its buckets, since its buyers live in their homes by them (BUCKETS, if
// given, must agree); a new sale takes BUCKETS (1 if not given), with tags chosen for distinct
// masters. A new layout must not leave behind a bucket of the last one that still holds
// orders on their way to Kafka or reservations: the sweepers visit only the current buckets.
func (g *Guard) warmLayout(ctx context.Context, sku string, opt WarmOptions) (l sale.Layout, kept bool, err error) {
	cur, err := g.LayoutOf(ctx, sku)
	if err != nil {
		return sale.Layout{}, false, err
	}
	state, err := g.rc.HGet(ctx, sale.KeysFor(sku).Meta, "state").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return sale.Layout{}, false, unavailable(err)
	}
	if state == sale.StateOpen || state == sale.StateWarming {
		if opt.Buckets != 0 && int(opt.Buckets) != cur.K() {
			return sale.Layout{}, false, badArgs("sale %s is open with %d buckets, and its buyers live in them: a forced re-warm keeps them (leave out BUCKETS, or close the sale first)", sku, cur.K())
		}
		return cur, true, nil
	}
	k := max(1, int(opt.Buckets))
	tags, err := g.chooseTags(ctx, sku, k)
	if err != nil {
		return sale.Layout{}, false, err
	}
	next := sale.Layout{SKU: sku, Tags: tags}
	for _, t := range cur.Tags {
		if next.Index(t) >= 0 {
			continue
		}
		k := sale.BucketKeys(sku, t)
		pipe := g.rc.Pipeline()
		outbox, reserved := pipe.XLen(ctx, k.Outbox), pipe.ZCard(ctx, k.Reserved)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return sale.Layout{}, false, unavailable(err)
		}
		if n := outbox.Val() + reserved.Val(); n > 0 {
			return sale.Layout{}, false, badArgs("bucket %d of the last sale of %s still holds %d orders or reservations on their way: warm again once the sweeper has sent them (or warm with the same BUCKETS)", t, sku, n)
		}
	}
	return next, false, nil
}

// splitMySQL sets up MySQL's stock rows for the layout l and returns each bucket's share of
// the stock and the total. A sale of one bucket keeps its stock in seckill_items (any bucket
// rows of an earlier split are folded back into it); a split sale keeps it in one
// seckill_item_buckets row per bucket, as even as it goes, with seckill_items.stock 0. kept (a
// forced re-warm of an open sale, whose layout stays) keeps the rows as they are when there is
// one per bucket: the sinks have charged each its own orders. One transaction, which locks the
// bucket rows before the item, in the sinks' order.
func (g *Guard) splitMySQL(ctx context.Context, sku string, l sale.Layout, kept bool) (shares []int64, total int64, err error) {
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	rows := map[int]int64{}
	r, err := tx.QueryContext(ctx, `SELECT bucket, stock FROM seckill_item_buckets WHERE sku = ? ORDER BY bucket FOR UPDATE`, sku)
	if err != nil {
		return nil, 0, err
	}
	for r.Next() {
		var b int
		var n int64
		if err := r.Scan(&b, &n); err != nil {
			r.Close()
			return nil, 0, err
		}
		rows[b] = n
		total += n
	}
	if err := r.Close(); err != nil {
		return nil, 0, err
	}
	var own int64
	if err := tx.QueryRowContext(ctx, `SELECT stock FROM seckill_items WHERE sku = ? FOR UPDATE`, sku).Scan(&own); err != nil {
		return nil, 0, err
	}
	total += own
	if kept && l.K() > 1 && len(rows) == l.K() && own == 0 {
		for _, t := range l.Tags {
			n, ok := rows[t]
			if !ok {
				break
			}
			shares = append(shares, n)
		}
		if len(shares) == l.K() {
			return shares, total, tx.Commit()
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM seckill_item_buckets WHERE sku = ?`, sku); err != nil {
		return nil, 0, err
	}
	shares = sale.SplitStock(total, l.K())
	own = total
	if l.K() > 1 {
		own = 0
		values := make([]string, l.K())
		args := make([]any, 0, 3*l.K())
		for i, t := range l.Tags {
			values[i] = "(?, ?, ?)"
			args = append(args, sku, t, shares[i])
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO seckill_item_buckets (sku, bucket, stock) VALUES `+strings.Join(values, ", "), args...); err != nil {
			return nil, 0, err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE seckill_items SET stock = ? WHERE sku = ?`, own, sku); err != nil {
		return nil, 0, err
	}
	return shares, total, tx.Commit()
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
