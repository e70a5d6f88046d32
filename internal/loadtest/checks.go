package loadtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	keyspace "seckill-proxy/sale"
)

// State is what the checks look at once the pipeline has drained: MySQL and Redis for one
// sale version, and what the buyers were told.
type State struct {
	Units int64 // the stock the sale started with
	// MySQL.
	MySQLStock     int64
	Confirmed      int64 // confirmed orders of this sale
	ConfirmedUnits int64 // their units
	Rejected       int64
	DupBuyers      int64 // buyers with more than one confirmed order
	MissingOrders  []string
	// ToldNotConfirmed are the orders handed out that MySQL stored as other than confirmed
	// (rejected): a buyer told "bought" who did not get it.
	ToldNotConfirmed []string
	// NotKnownConfirmed counts the buyers told UNAVAILABLE (the outcome not known) who hold a
	// confirmed order: their buy had run.
	NotKnownConfirmed int64
	// Redis.
	RedisStock  int64
	RedisBuyers int64
	Outbox      int64
	// Stored counts the orders of this sale version MySQL holds, whatever their status, and
	// RedisOutcomes the outcomes Redis holds for SECKILL.STATUS (the result hashes): the sink
	// writes each one back once MySQL has it.
	Stored, RedisOutcomes int64
	// The buyers: order replies, and units per order; SoldOutTold the SOLDOUT replies.
	Successes   int64
	Qty         int64
	SoldOutTold int64
}

// Check is one invariant's verdict.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Evaluate checks the invariants I1-I3 and I5 of docs/ARCHITECTURE.md on s. Each check can fail on its own.
func Evaluate(s State) []Check {
	sold := s.Units - s.MySQLStock
	missing := fmt.Sprintf("%d", len(s.MissingOrders))
	if n := len(s.MissingOrders); n > 0 {
		missing += " (first: " + s.MissingOrders[0] + ")"
	}
	return []Check{
		{"I1 no oversell", s.ConfirmedUnits <= s.Units && s.MySQLStock >= 0 && s.RedisStock >= 0,
			fmt.Sprintf("confirmed units %d of %d; MySQL stock %d; Redis stock %d", s.ConfirmedUnits, s.Units, s.MySQLStock, s.RedisStock)},
		{"successes = confirmed orders = units sold", s.Successes == s.Confirmed && s.Successes*s.Qty == sold && s.ConfirmedUnits == sold,
			fmt.Sprintf("successes %d, confirmed orders %d (%d units), units sold %d", s.Successes, s.Confirmed, s.ConfirmedUnits, sold)},
		{"I2 every order handed out is in MySQL", len(s.MissingOrders) == 0, "missing " + missing},
		{"I3 no duplicate buyer", s.DupBuyers == 0, fmt.Sprintf("buyers with more than one confirmed order: %d", s.DupBuyers)},
		{"no rejected order", s.Rejected == 0, fmt.Sprintf("rejected %d", s.Rejected)},
		{"I5 Redis stock = MySQL stock", s.RedisStock == s.MySQLStock, fmt.Sprintf("Redis %d, MySQL %d", s.RedisStock, s.MySQLStock)},
		{"I5 Redis buyers = MySQL confirmed", s.RedisBuyers == s.Confirmed, fmt.Sprintf("Redis %d, MySQL %d", s.RedisBuyers, s.Confirmed)},
		{"outbox drained", s.Outbox == 0, fmt.Sprintf("%d entries", s.Outbox)},
		outcomesInRedis(s),
	}
}

// EvaluateUnderFaults checks the invariants that hold under any single fault (the fault table
// of docs/DELIVERY.md), on s, buyer by buyer: every buyer told "bought" ends with that order
// confirmed (I9; told bought and then rejected or missing fails the run), and no buyer is told
// SOLDOUT while units stay unsold after the drain. A reply lost to a fault (an order in MySQL
// whose buyer was told nothing), a buyer told UNAVAILABLE whose order stands, and an order
// MySQL rejected that no buyer was told of are counted in the report, not failures. With
// rejectedOK (a fault that writes Redis behind the proxy's back, such as an operator's SET of
// the stock), an order told and then rejected is counted, not failed: the MySQL guard is the
// last line there.
func EvaluateUnderFaults(s State, rejectedOK bool) []Check {
	missing := fmt.Sprintf("%d", len(s.MissingOrders))
	if n := len(s.MissingOrders); n > 0 {
		missing += " (first: " + s.MissingOrders[0] + ")"
	}
	told := fmt.Sprintf("%d", len(s.ToldNotConfirmed))
	if n := len(s.ToldNotConfirmed); n > 0 {
		told += " (first: " + s.ToldNotConfirmed[0] + ")"
	}
	stored := s.Confirmed + s.Rejected
	return []Check{
		{"I1 no oversell", s.ConfirmedUnits <= s.Units && s.MySQLStock >= 0 && s.ConfirmedUnits == s.Units-s.MySQLStock,
			fmt.Sprintf("confirmed units %d of %d; MySQL stock %d", s.ConfirmedUnits, s.Units, s.MySQLStock)},
		{"I2 every order handed out is in MySQL", len(s.MissingOrders) == 0, "missing " + missing},
		{"I9 every order handed out is confirmed", rejectedOK || len(s.ToldNotConfirmed) == 0, "told bought, then rejected: " + told},
		{"I3 no duplicate buyer", s.DupBuyers == 0, fmt.Sprintf("buyers with more than one confirmed order: %d", s.DupBuyers)},
		{"every unit sold in Redis reached MySQL", s.RedisBuyers <= stored,
			fmt.Sprintf("Redis buyers %d, MySQL orders %d (%d confirmed, %d rejected)", s.RedisBuyers, stored, s.Confirmed, s.Rejected)},
		{"no false sold-out", s.SoldOutTold == 0 || s.MySQLStock == 0,
			fmt.Sprintf("%d buyers told SOLDOUT, %d units unsold in MySQL after the drain", s.SoldOutTold, s.MySQLStock)},
		{"outbox drained", s.Outbox == 0, fmt.Sprintf("%d entries", s.Outbox)},
		outcomesInRedis(s),
	}
}

// outcomesInRedis checks that every order MySQL stored has its outcome in Redis, where
// SECKILL.STATUS reads it: an outcome lost (written to a master that a failover then
// replaced) leaves its buyer told "pending" for ever.
func outcomesInRedis(s State) Check {
	return Check{"every stored order's outcome in Redis", s.RedisOutcomes == s.Stored,
		fmt.Sprintf("%d outcomes in Redis for %d orders in MySQL", s.RedisOutcomes, s.Stored)}
}

// AwaitOutcomes waits, up to d, until Redis holds as many outcomes of s as MySQL holds orders:
// the sink writes them back a moment after its commit, and across a failover once a replica
// holds them.
func AwaitOutcomes(ctx context.Context, d time.Duration, db *sql.DB, rc redis.UniversalClient, s Sale) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		var stored int64
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM seckill_orders WHERE sku = ? AND sale_version = ?`, s.SKU, s.Version).Scan(&stored); err == nil {
			if n, err := sumBuckets(ctx, rc, s.SKU, func(p redis.Pipeliner, k keyspace.Keys) redis.Cmder { return p.HLen(ctx, k.Result) }); err == nil && n >= stored {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Sale is the sale under test, and what its buyers were told that the checks compare with
// the outcome: the uids told UNAVAILABLE, and how many were told SOLDOUT.
type Sale struct {
	SKU         string
	Units       int
	Version     int64
	Qty         int
	NotKnown    []string
	SoldOutTold int64
}

// Setup creates or resets sku's item in MySQL with units, and opens a new sale through the
// proxy (closing any open one first; FORCE, since a reset item may still have a backlog or a
// MySQL state that Redis lost), with warm's further options (RATE, BURST). It returns the sale
// version.
func Setup(ctx context.Context, db *sql.DB, proxy redis.UniversalClient, sku string, units, limit int, warm ...any) (int64, error) {
	if _, err := db.ExecContext(ctx, `INSERT INTO seckill_items (sku, stock) VALUES (?, ?)
		ON DUPLICATE KEY UPDATE stock = VALUES(stock), status = 'idle'`, sku, units); err != nil {
		return 0, fmt.Errorf("setup item: %w", err)
	}
	if err := proxy.Do(ctx, "seckill.close", sku).Err(); err != nil && !strings.Contains(err.Error(), "never warmed") {
		return 0, fmt.Errorf("close the previous sale: %w", err)
	}
	v, err := proxy.Do(ctx, append([]any{"seckill.warm", sku, "LIMIT", limit, "FORCE"}, warm...)...).Result()
	if err != nil {
		return 0, fmt.Errorf("SECKILL.WARM: %w", err)
	}
	switch v := v.(type) {
	case map[any]any: // RESP3
		if n, ok := v["version"].(int64); ok {
			return n, nil
		}
	case []any: // RESP2: field, value, ...
		for i := 0; i+1 < len(v); i += 2 {
			if v[i] == "version" {
				n, _ := v[i+1].(int64)
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("SECKILL.WARM replied %v", v)
}

// Drain waits until MySQL holds an outcome for every order handed out, and returns how long
// after lastBuy that was. MySQL may be down for a while (a fault): a failed query is tried
// again until ctx ends.
func Drain(ctx context.Context, db *sql.DB, s Sale, orders int, lastBuy time.Time) (time.Duration, error) {
	var lastErr error
	n := 0
	for {
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM seckill_orders WHERE sku = ? AND sale_version = ?`, s.SKU, s.Version).Scan(&n)
		if err == nil && n >= orders {
			return time.Since(lastBuy), nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return 0, fmt.Errorf("the sink stored %d of %d orders before the drain timeout (last MySQL error: %w)", n, orders, lastErr)
			}
			return 0, fmt.Errorf("the sink stored %d of %d orders before the drain timeout", n, orders)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// GatherWithin is Gather, tried again every 200 ms for up to d while it fails: after a fault
// (a failover, MariaDB restarting) the services can take a moment to answer reads again.
func GatherWithin(ctx context.Context, d time.Duration, db *sql.DB, rc redis.UniversalClient, s Sale, orders []string) (State, error) {
	deadline := time.Now().Add(d)
	for {
		st, err := Gather(ctx, db, rc, s, orders)
		if err == nil || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Gather reads the state of s after the drain.
func Gather(ctx context.Context, db *sql.DB, rc redis.UniversalClient, s Sale, orders []string) (State, error) {
	st := State{Units: int64(s.Units), Successes: int64(len(orders)), Qty: int64(s.Qty), SoldOutTold: s.SoldOutTold}
	if err := db.QueryRowContext(ctx, `SELECT stock FROM seckill_stock WHERE sku = ?`, s.SKU).Scan(&st.MySQLStock); err != nil {
		return st, err
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(qty), 0) FROM seckill_orders WHERE sku = ? AND sale_version = ? AND status = 'confirmed'`,
		s.SKU, s.Version).Scan(&st.Confirmed, &st.ConfirmedUnits); err != nil {
		return st, err
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM seckill_orders WHERE sku = ? AND sale_version = ? AND status = 'rejected'`,
		s.SKU, s.Version).Scan(&st.Rejected); err != nil {
		return st, err
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT uid FROM seckill_orders WHERE sku = ? AND sale_version = ? AND status = 'confirmed'
		GROUP BY uid HAVING COUNT(*) > 1) d`, s.SKU, s.Version).Scan(&st.DupBuyers); err != nil {
		return st, err
	}
	stored := map[string]string{}      // order id -> status
	confirmedUIDs := map[string]bool{} // buyers with a confirmed order
	rows, err := db.QueryContext(ctx, `SELECT order_id, uid, status FROM seckill_orders WHERE sku = ? AND sale_version = ?`, s.SKU, s.Version)
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var id, uid, status string
		if err := rows.Scan(&id, &uid, &status); err != nil {
			rows.Close()
			return st, err
		}
		stored[id] = status
		st.Stored++
		if status == "confirmed" {
			confirmedUIDs[uid] = true
		}
	}
	rows.Close()
	for _, id := range orders {
		switch stored[id] {
		case "":
			st.MissingOrders = append(st.MissingOrders, id)
		case "confirmed":
		default:
			st.ToldNotConfirmed = append(st.ToldNotConfirmed, id)
		}
	}
	for _, uid := range s.NotKnown {
		if confirmedUIDs[uid] {
			st.NotKnownConfirmed++
		}
	}
	// A sale split into stock buckets: every figure is the sum of its buckets'.
	if st.RedisStock, err = sumBuckets(ctx, rc, s.SKU, func(p redis.Pipeliner, k keyspace.Keys) redis.Cmder { return p.Get(ctx, k.Stock) }); err != nil {
		return st, fmt.Errorf("redis stock: %w", err)
	}
	if st.RedisBuyers, err = sumBuckets(ctx, rc, s.SKU, func(p redis.Pipeliner, k keyspace.Keys) redis.Cmder { return p.HLen(ctx, k.Buyers) }); err != nil {
		return st, fmt.Errorf("redis buyers: %w", err)
	}
	if st.Outbox, err = sumBuckets(ctx, rc, s.SKU, func(p redis.Pipeliner, k keyspace.Keys) redis.Cmder { return p.XLen(ctx, k.Outbox) }); err != nil {
		return st, fmt.Errorf("redis outbox: %w", err)
	}
	if st.RedisOutcomes, err = sumBuckets(ctx, rc, s.SKU, func(p redis.Pipeliner, k keyspace.Keys) redis.Cmder { return p.HLen(ctx, k.Result) }); err != nil {
		return st, fmt.Errorf("redis outcomes: %w", err)
	}
	return st, nil
}

// sumBuckets sums one read (a number: HLEN, XLEN, or GET of a count) over each stock bucket
// of sku's sale (one bucket for a sale that is not split), in one pipeline.
func sumBuckets(ctx context.Context, rc redis.UniversalClient, sku string, read func(redis.Pipeliner, keyspace.Keys) redis.Cmder) (int64, error) {
	b, err := rc.HGet(ctx, keyspace.KeysFor(sku).Meta, "buckets").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	tags, err := keyspace.ParseBuckets(b)
	if err != nil {
		return 0, err
	}
	l := keyspace.Layout{SKU: sku, Tags: tags}
	pipe := rc.Pipeline()
	cmds := make([]redis.Cmder, l.K())
	for i := range tags {
		cmds[i] = read(pipe, l.Keys(i))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		switch c := c.(type) {
		case *redis.IntCmd:
			n += c.Val()
		case *redis.StringCmd:
			v, err := c.Int64()
			if err != nil {
				return 0, err
			}
			n += v
		}
	}
	return n, nil
}

// outcomesTold checks, for a run whose buyers waited for their outcomes with no fault, that
// every buyer with an order was told its outcome (none ended pending, none failed).
func outcomesTold(o Outcomes, orders int) Check {
	told := o.Confirmed + o.Rejected + o.Cancelled
	return Check{"outcomes told", told == int64(orders) && o.Pending == 0 && o.Errors == 0,
		fmt.Sprintf("%d of %d buyers told their outcome by SECKILL.STATUS ... WAIT (confirmed %d, rejected %d, cancelled %d); pending %d, errors %d",
			told, orders, o.Confirmed, o.Rejected, o.Cancelled, o.Pending, o.Errors)}
}
