package loadtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"

	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/schema"
	keyspace "seckill-proxy/sale"
)

// The schemes' buyers: each scheme set up for one sale, and what it counts once the load ends.

// openScheme sets up sku's sale of o.Units under scheme name.
func openScheme(ctx context.Context, o SchemesOptions, name, sku string) (*scheme, error) {
	switch name {
	case SchemeMySQLLock:
		return openMySQLLock(ctx, o, sku)
	case SchemeOneRedis:
		return openOneRedis(ctx, o, sku)
	case SchemeSeeds:
		return openSeedsScheme(ctx, o, sku)
	case SchemeProxy:
		return openProxyScheme(ctx, o, o.Proxy, sku, 1)
	case SchemeNoWait:
		return openProxyScheme(ctx, o, o.ProxyNoWait, sku, 1)
	case SchemeBuckets:
		return openProxyScheme(ctx, o, o.Proxy, sku, o.Buckets)
	}
	return openLocal(o), nil
}

// The optimistic lock's tables: the stock row with its version, and the orders, one per
// buyer. They live beside the proxy's own tables, apart from them.
const lockTables = `CREATE TABLE IF NOT EXISTS bench_lock_stock (
	sku VARCHAR(64) NOT NULL PRIMARY KEY, stock INT NOT NULL, version BIGINT NOT NULL
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS bench_lock_orders (
	id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, sku VARCHAR(64) NOT NULL, uid VARCHAR(64) NOT NULL,
	qty INT NOT NULL, UNIQUE KEY sku_uid (sku, uid)
) ENGINE=InnoDB`

// openMySQLLock is the seeds' optimistic lock: read the stock and its version, then
// UPDATE ... SET stock = stock - qty, version = version + 1 WHERE sku = ? AND version = ?, and
// the order's INSERT, in one transaction; a buyer whose UPDATE found the version moved reads
// again, up to o.Tries times, then gives up (BUSY).
func openMySQLLock(ctx context.Context, o SchemesOptions, sku string) (*scheme, error) {
	db, err := schema.Open(o.Services.MySQL)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(min(o.Load.Conns, 500))
	db.SetMaxIdleConns(min(o.Load.Conns, 500))
	for stmt := range strings.SplitSeq(lockTables, ";\n") {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			db.Close()
			return nil, fmt.Errorf("the optimistic lock's tables: %w", err)
		}
	}
	_, err = db.ExecContext(ctx, `DELETE FROM bench_lock_orders WHERE sku = ?`, sku)
	if err == nil {
		_, err = db.ExecContext(ctx, `REPLACE INTO bench_lock_stock (sku, stock, version) VALUES (?, ?, 0)`, sku, o.Units)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	qty := o.Load.Qty
	buy := func(ctx context.Context, uid string) (string, error) { return lockBuy(ctx, db, sku, uid, qty, o.Tries) }
	settle := func(ctx context.Context, res Result) (kept, error) {
		var units int64
		err := db.QueryRowContext(ctx, `SELECT COALESCE(SUM(qty), 0) FROM bench_lock_orders WHERE sku = ?`, sku).Scan(&units)
		return keptOf(units, res, qty), err
	}
	return &scheme{buy: buy, settle: settle, close: func() { db.Close() }}, nil
}

var errLockBusy = errors.New("BUSY the optimistic lock lost every try")

// lockBuy is one buyer's optimistic-lock buy.
func lockBuy(ctx context.Context, db *sql.DB, sku, uid string, qty, tries int) (string, error) {
	for range tries {
		var stock, version int64
		if err := db.QueryRowContext(ctx, `SELECT stock, version FROM bench_lock_stock WHERE sku = ?`, sku).Scan(&stock, &version); err != nil {
			return "", fmt.Errorf("UNAVAILABLE %w", err)
		}
		if stock < int64(qty) {
			return "", errSeedsSoldOut
		}
		id, won, err := lockTx(ctx, db, sku, uid, qty, version)
		if err != nil || won {
			return id, err
		}
	}
	return "", errLockBusy
}

// lockTx is one try: won is false when another buyer moved the version first.
func lockTx(ctx context.Context, db *sql.DB, sku, uid string, qty int, version int64) (id string, won bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", false, fmt.Errorf("UNAVAILABLE %w", err)
	}
	defer func() {
		if !won || err != nil {
			_ = tx.Rollback()
		}
	}()
	res, err := tx.ExecContext(ctx, `UPDATE bench_lock_stock SET stock = stock - ?, version = version + 1 WHERE sku = ? AND version = ?`, qty, sku, version)
	if err != nil {
		return "", false, fmt.Errorf("UNAVAILABLE %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return "", false, nil
	}
	ins, err := tx.ExecContext(ctx, `INSERT INTO bench_lock_orders (sku, uid, qty) VALUES (?, ?, ?)`, sku, uid, qty)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1062 { // ER_DUP_ENTRY
		return "", true, errSeedsDuplicate
	}
	if err != nil {
		return "", false, fmt.Errorf("UNAVAILABLE %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", false, fmt.Errorf("UNAVAILABLE %w", err)
	}
	n, _ := ins.LastInsertId()
	return strconv.FormatInt(n, 10), true, nil
}

// openOneRedis is the seeds' own design (Seeds) on one Redis server: their stock script, a
// local sold-out flag, a synchronous Kafka send per order.
func openOneRedis(ctx context.Context, o SchemesOptions, sku string) (*scheme, error) {
	if o.OneRedis == "" {
		return nil, errors.New("no address for the one Redis (-one-redis)")
	}
	var rc redis.UniversalClient
	if o.Failover {
		c := o.Services.Redis
		c.PoolSize, c.MinIdleConns = o.Load.Conns, o.Load.Conns
		rc = connect.Redis(c)
	} else {
		rc = redis.NewClient(&redis.Options{Addr: o.OneRedis, PoolSize: o.Load.Conns, MinIdleConns: o.Load.Conns, Protocol: 2})
	}
	seeds, err := openSeeds(ctx, o.Services.Kafka, rc, sku, o.Units)
	if err != nil {
		rc.Close()
		return nil, err
	}
	settle := func(ctx context.Context, res Result) (kept, error) {
		left, err := rc.Get(ctx, seeds.keys[0]).Int64()
		return keptOf(int64(o.Units)-left, res, o.Load.Qty), err
	}
	return &scheme{buy: seeds.Buy, settle: settle, close: func() { seeds.Close(); rc.Close() }, stockKey: seeds.keys[0]}, nil
}

// openProxyScheme opens the sale on the proxy at addr, over buckets stock buckets; its
// orders are kept once the sink has stored them all.
func openProxyScheme(ctx context.Context, o SchemesOptions, addr, sku string, buckets int) (*scheme, error) {
	if addr == "" {
		return nil, errors.New("no proxy address (-addr)")
	}
	db, err := schema.Open(o.Services.MySQL)
	if err != nil {
		return nil, err
	}
	pc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: o.Load.Conns, MinIdleConns: o.Load.Conns, ReadTimeout: 10 * time.Second, Protocol: 2})
	closeAll := func() { pc.Close(); db.Close() }
	var warm []any
	if buckets > 1 {
		warm = []any{"BUCKETS", buckets}
	}
	version, err := Setup(ctx, db, pc, sku, o.Units, max(1, o.Load.Qty), warm...)
	if err != nil {
		closeAll()
		return nil, err
	}
	buy, _ := ProxyBuyer(pc, sku, o.Load.Qty)
	settle := func(ctx context.Context, res Result) (kept, error) {
		return settleProxySale(ctx, o, db, Sale{SKU: sku, Units: o.Units, Version: version, Qty: o.Load.Qty}, res)
	}
	return &scheme{buy: buy, settle: settle, close: closeAll, stockKey: keyspace.KeysFor(sku).Stock}, nil
}

// settleProxySale waits until MySQL holds an outcome for every unit Redis sold (after a
// failover, the buys answered UNAVAILABLE whose order stood come later, through the sweeper;
// a split sale's reservations are settled first), and reads what MySQL confirmed of them and
// which orders told were not confirmed.
func settleProxySale(ctx context.Context, o SchemesOptions, db *sql.DB, s Sale, res Result) (kept, error) {
	rc := connect.Redis(o.Services.Redis)
	defer rc.Close()
	target := len(res.Orders)
	if o.Failover {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if n, err := sumBuckets(ctx, rc, s.SKU, func(p redis.Pipeliner, k keyspace.Keys) redis.Cmder { return p.ZCard(ctx, k.Reserved) }); err == nil && n == 0 {
				break
			}
		}
		if n, err := sumBuckets(ctx, rc, s.SKU, func(p redis.Pipeliner, k keyspace.Keys) redis.Cmder { return p.HLen(ctx, k.Buyers) }); err == nil {
			target = max(target, int(n))
		}
	}
	dctx, cancel := context.WithTimeout(ctx, o.Drain)
	defer cancel()
	if _, err := Drain(dctx, db, s, target, res.LastBuy); err != nil {
		return kept{}, err
	}
	st, err := GatherWithin(ctx, 30*time.Second, db, rc, s, res.Orders)
	if err != nil {
		return kept{}, err
	}
	return kept{units: st.ConfirmedUnits, notKept: int64(len(st.ToldNotConfirmed)+len(st.MissingOrders)) * int64(s.Qty)}, nil
}

// localStock is one instance's stock in its own memory: what every instance was told the
// sale has, sold with no word to the others.
type localStock struct {
	mu     sync.Mutex
	left   int
	buyers map[string]bool
}

func (l *localStock) buy(uid string, qty int) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.buyers[uid]:
		return "", errSeedsDuplicate
	case l.left < qty:
		return "", errSeedsSoldOut
	}
	l.left -= qty
	l.buyers[uid] = true
	return xid.New().String(), nil
}

// localInstances is how many instances SchemeLocal runs: the fewest that can oversell.
const localInstances = 2

// openLocal is local in-process stock: localInstances instances, each holding the whole
// stock, take the buyers in turn as a load balancer hands them out.
func openLocal(o SchemesOptions) *scheme {
	inst := make([]*localStock, localInstances)
	for i := range inst {
		inst[i] = &localStock{left: o.Units, buyers: map[string]bool{}}
	}
	var turn atomic.Uint64
	qty := o.Load.Qty
	buy := func(_ context.Context, uid string) (string, error) {
		return inst[turn.Add(1)%localInstances].buy(uid, qty)
	}
	settle := func(_ context.Context, res Result) (kept, error) {
		var sold int64
		for _, l := range inst {
			l.mu.Lock()
			sold += int64(o.Units - l.left)
			l.mu.Unlock()
		}
		return keptOf(sold, res, qty), nil
	}
	return &scheme{buy: buy, settle: settle, close: func() {}}
}
