package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Order outcomes, as stored in seckill_orders.status and in each SKU's result hash.
const (
	StatusConfirmed = "confirmed"
	StatusRejected  = "rejected"
	StatusCancelled = "cancelled"
)

// Reasons an order is rejected.
const (
	ReasonSoldOut   = "sold out"
	ReasonDuplicate = "duplicate buyer"
	ReasonNoItem    = "no such item"
)

// Outcome is what became of one order in MySQL.
type Outcome struct {
	OrderID string
	SKU     string
	Status  string
	Reason  string
	// New is false when the order was already stored (a redelivery): nothing changed.
	New bool
}

// Value is the outcome as the result hash holds it: "confirmed", or "rejected <reason>".
func (o Outcome) Value() string {
	if o.Reason == "" {
		return o.Status
	}
	return o.Status + " " + o.Reason
}

// errStockMoved: the stock changed under the row lock, which cannot happen unless something
// writes seckill_items without it. The transaction is rolled back and retried.
var errStockMoved = errors.New("seckill_items stock changed under the row lock")

// Persist stores orders, in the order given (Kafka's order within a partition), in one MySQL
// transaction, and returns each distinct order's outcome. Every order keeps the semantics of
// its own transaction: it is inserted once (a redelivered order id changes nothing); it is
// confirmed only if its buyer has no confirmed order in that sale and the item's stock covers
// its qty, else it is stored as rejected with a reason; and the stock is taken with
// UPDATE ... WHERE stock >= qty on an unsigned column, so MySQL itself refuses an oversell.
func Persist(ctx context.Context, db *sql.DB, orders []Order) ([]Outcome, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	out, err := persist(ctx, tx, orders)
	if err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return out, tx.Commit()
}

type buyer struct {
	version  int64
	sku, uid string
}

func persist(ctx context.Context, tx *sql.Tx, orders []Order) ([]Outcome, error) {
	// Distinct orders, first occurrence wins: the tee and the sweeper may both have sent one.
	seen := make(map[string]bool, len(orders))
	uniq := orders[:0:0]
	for _, o := range orders {
		if !seen[o.OrderID] {
			seen[o.OrderID] = true
			uniq = append(uniq, o)
		}
	}
	if len(uniq) == 0 {
		return nil, nil
	}

	existing := map[string]Outcome{}
	ids := make([]any, len(uniq))
	for i, o := range uniq {
		ids[i] = o.OrderID
	}
	rows, err := tx.QueryContext(ctx, `SELECT order_id, sku, status, reason FROM seckill_orders WHERE order_id IN (`+marks(len(ids))+`)`, ids...)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var o Outcome
		if err := rows.Scan(&o.OrderID, &o.SKU, &o.Status, &o.Reason); err != nil {
			rows.Close()
			return nil, err
		}
		existing[o.OrderID] = o
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}

	var fresh []Order
	skuSet, versionSet, uidSet := map[string]bool{}, map[int64]bool{}, map[string]bool{}
	for _, o := range uniq {
		if _, ok := existing[o.OrderID]; !ok {
			fresh = append(fresh, o)
			skuSet[o.SKU], versionSet[o.SaleVersion], uidSet[o.UID] = true, true, true
		}
	}
	stock := map[string]int64{}
	confirmed := map[buyer]bool{}
	if len(fresh) > 0 {
		skus := sortedKeys(skuSet)
		// Lock the items in a fixed order, so that two sinks cannot deadlock.
		if err := scan(ctx, tx, `SELECT sku, stock FROM seckill_items WHERE sku IN (`+marks(len(skus))+`) ORDER BY sku FOR UPDATE`,
			anys(skus), func(r *sql.Rows) error {
				var sku string
				var n int64
				err := r.Scan(&sku, &n)
				stock[sku] = n
				return err
			}); err != nil {
			return nil, err
		}
		versions := make([]any, 0, len(versionSet))
		for v := range versionSet {
			versions = append(versions, v)
		}
		uids := sortedKeys(uidSet)
		args := append(append(versions, anys(skus)...), anys(uids)...)
		if err := scan(ctx, tx, `SELECT sale_version, sku, uid FROM seckill_orders WHERE sale_version IN (`+marks(len(versions))+
			`) AND sku IN (`+marks(len(skus))+`) AND confirmed_uid IN (`+marks(len(uids))+`)`, args, func(r *sql.Rows) error {
			var b buyer
			err := r.Scan(&b.version, &b.sku, &b.uid)
			confirmed[b] = true
			return err
		}); err != nil {
			return nil, err
		}
	}

	// Decide each new order in Kafka order, as one transaction per order would.
	decided := make(map[string]Outcome, len(fresh))
	taken := map[string]int64{}
	var values []string
	var args []any
	for _, o := range fresh {
		oc := Outcome{OrderID: o.OrderID, SKU: o.SKU, Status: StatusConfirmed, New: true}
		b := buyer{o.SaleVersion, o.SKU, o.UID}
		left, known := stock[o.SKU]
		switch {
		case !known:
			oc.Status, oc.Reason = StatusRejected, ReasonNoItem
		case confirmed[b]:
			oc.Status, oc.Reason = StatusRejected, ReasonDuplicate
		case left < o.Qty:
			oc.Status, oc.Reason = StatusRejected, ReasonSoldOut
		default:
			stock[o.SKU] = left - o.Qty
			taken[o.SKU] += o.Qty
			confirmed[b] = true
		}
		decided[o.OrderID] = oc
		values = append(values, "(?, ?, ?, ?, ?, ?, ?)")
		args = append(args, o.OrderID, o.SKU, o.UID, o.Qty, o.SaleVersion, oc.Status, oc.Reason)
	}
	if len(values) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO seckill_orders (order_id, sku, uid, qty, sale_version, status, reason) VALUES `+
			strings.Join(values, ", "), args...); err != nil {
			return nil, err
		}
	}
	for _, sku := range sortedKeys(taken) {
		q := taken[sku]
		r, err := tx.ExecContext(ctx, `UPDATE seckill_items SET stock = stock - ? WHERE sku = ? AND stock >= ?`, q, sku, q)
		if err != nil {
			return nil, err
		}
		if n, err := r.RowsAffected(); err != nil || n != 1 {
			return nil, fmt.Errorf("%w: sku %s, taking %d", errStockMoved, sku, q)
		}
	}

	out := make([]Outcome, 0, len(uniq))
	for _, o := range uniq {
		if oc, ok := decided[o.OrderID]; ok {
			out = append(out, oc)
		} else {
			out = append(out, existing[o.OrderID])
		}
	}
	return out, nil
}

func scan(ctx context.Context, tx *sql.Tx, query string, args []any, each func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := each(rows); err != nil {
			rows.Close()
			return err
		}
	}
	return closeRows(rows)
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// marks returns n comma-separated placeholders.
func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
