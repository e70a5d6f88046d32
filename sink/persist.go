package sink

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"seckill-proxy/sale"
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
	ReasonReleased  = "released"
)

// Outcome is what became of one order in MySQL.
type Outcome struct {
	OrderID string
	SKU     string
	Status  string
	Reason  string
	// New is false when the order was already stored (a redelivery): nothing changed.
	New bool
	// Revoked is set when a release cancelled an order that was confirmed.
	Revoked bool
	// Version is the sale version the order was made in.
	Version int64
	// Home is the tag number of the stock bucket where the order's buyer lives, whose result
	// hash takes the outcome (0: the sale's own keys).
	Home int
	// UID is the order's buyer: the outcome stream names them, for the buyers waiting.
	UID string
	// BoughtMs is the buy's time (Redis's, Unix ms; the message's ts), from which outcome.lua
	// measures the delay from buy to stored.
	BoughtMs int64
}

// Told is the outcome as SECKILL.STATUS tells it to the buyer: "confirmed <id>", "cancelled
// <id>", "rejected <id> <reason>".
func (o Outcome) Told() string {
	if o.Status != StatusRejected {
		return o.Status + " " + o.OrderID
	}
	return o.Status + " " + o.OrderID + " " + o.Reason
}

// Value is the outcome as the result hash holds it: "confirmed", "cancelled", or
// "rejected <reason>".
func (o Outcome) Value() string {
	if o.Status != StatusRejected {
		return o.Status
	}
	return o.Status + " " + o.Reason
}

// errStockMoved: the stock changed under the row lock, which cannot happen unless something
// writes seckill_items (or seckill_item_buckets) without it. The transaction is rolled back and retried.
var errStockMoved = errors.New("seckill_items stock changed under the row lock")

// Persist stores orders and releases, in the order given (Kafka's order within a partition),
// in one MySQL transaction, and returns each distinct message's outcome. A release cancels a
// confirmed order and gives its stock back; a release that overtakes its order stores the
// order as cancelled. Every order keeps the semantics of
// its own transaction: it is inserted once (a redelivered order id changes nothing); it is
// confirmed only if its buyer has no confirmed order in that sale and the stock of its row
// covers its qty (the item's, or for a sale split into stock buckets the row of the bucket
// that sold it), else it is stored as rejected with a reason; and the stock is taken with
// UPDATE ... WHERE stock >= qty on an unsigned column, so MySQL itself refuses an oversell.
func Persist(ctx context.Context, db *sql.DB, orders []sale.Order) ([]Outcome, error) {
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

// stored is an order as MySQL (or this batch) has it.
type stored struct {
	Outcome
	buyer
	qty int64
}

func persist(ctx context.Context, tx *sql.Tx, msgs []sale.Order) ([]Outcome, error) {
	uniq := distinct(msgs)
	if len(uniq) == 0 {
		return nil, nil
	}
	existing, err := readStored(ctx, tx, uniq)
	if err != nil {
		return nil, err
	}
	stock, rowOf, err := lockStock(ctx, tx, uniq)
	if err != nil {
		return nil, err
	}
	confirmed, err := readConfirmed(ctx, tx, uniq)
	if err != nil {
		return nil, err
	}
	b := &batch{existing: existing, stock: stock, rowOf: rowOf, confirmed: confirmed,
		inserts: map[string]*stored{}, taken: map[stockRow]int64{}, out: make([]Outcome, 0, len(uniq))}
	// Decide each message in Kafka order, as one transaction per message would.
	for _, m := range uniq {
		b.decide(m)
	}
	if err := b.write(ctx, tx); err != nil {
		return nil, err
	}
	return b.out, nil
}

// distinct is msgs less repeats, first occurrence wins: the tee and the sweeper may both have
// sent one. An order and its release share an order id, so the type is part of the key.
func distinct(msgs []sale.Order) []sale.Order {
	seen := make(map[string]bool, len(msgs))
	uniq := msgs[:0:0]
	for _, m := range msgs {
		if k := m.Type + " " + m.OrderID; !seen[k] {
			seen[k] = true
			uniq = append(uniq, m)
		}
	}
	return uniq
}

// readStored is what MySQL already has of these orders, by order id.
func readStored(ctx context.Context, tx *sql.Tx, uniq []sale.Order) (map[string]stored, error) {
	existing := map[string]stored{}
	ids := make([]any, 0, len(uniq))
	for _, m := range uniq {
		ids = append(ids, m.OrderID)
	}
	err := scan(ctx, tx, `SELECT order_id, sku, uid, qty, sale_version, status, reason FROM seckill_orders WHERE order_id IN (`+marks(len(ids))+`)`,
		ids, func(r *sql.Rows) error {
			var o stored
			err := r.Scan(&o.OrderID, &o.SKU, &o.uid, &o.qty, &o.version, &o.Status, &o.Reason)
			o.buyer.sku = o.SKU
			existing[o.OrderID] = o
			return err
		})
	return existing, err
}

// readConfirmed is which of the orders' buyers hold a confirmed order in their sale already.
func readConfirmed(ctx context.Context, tx *sql.Tx, uniq []sale.Order) (map[buyer]bool, error) {
	skuSet, versionSet, uidSet := map[string]bool{}, map[int64]bool{}, map[string]bool{}
	for _, m := range uniq {
		skuSet[m.SKU] = true
		if m.Type == sale.TypeOrder {
			versionSet[m.SaleVersion], uidSet[m.UID] = true, true
		}
	}
	confirmed := map[buyer]bool{}
	if len(uidSet) == 0 {
		return confirmed, nil
	}
	versions := make([]any, 0, len(versionSet))
	for v := range versionSet {
		versions = append(versions, v)
	}
	skus, uids := sortedKeys(skuSet), sortedKeys(uidSet)
	args := append(append(versions, anys(skus)...), anys(uids)...)
	err := scan(ctx, tx, `SELECT sale_version, sku, uid FROM seckill_orders WHERE sale_version IN (`+marks(len(versions))+
		`) AND sku IN (`+marks(len(skus))+`) AND confirmed_uid IN (`+marks(len(uids))+`)`, args, func(r *sql.Rows) error {
		var b buyer
		err := r.Scan(&b.version, &b.sku, &b.uid)
		confirmed[b] = true
		return err
	})
	return confirmed, err
}

// batch is what persist has decided so far, and what it read.
type batch struct {
	existing  map[string]stored
	stock     map[stockRow]int64
	rowOf     func(sale.Order) stockRow
	confirmed map[buyer]bool
	inserts   map[string]*stored // new rows, by order id
	// insertOrder is the new rows' order ids, in the order decided.
	insertOrder []string
	cancels     []any // stored confirmed orders that a release cancels
	taken       map[stockRow]int64
	out         []Outcome
}

// lookup is the order with id as this batch has it (isNew: a row this batch inserts), or nil.
func (b *batch) lookup(id string) (o *stored, isNew bool) {
	if o, ok := b.inserts[id]; ok {
		return o, true
	}
	if o, ok := b.existing[id]; ok {
		return &o, false
	}
	return nil, false
}

// decide decides one message and appends its outcome.
func (b *batch) decide(m sale.Order) {
	cur, isNew := b.lookup(m.OrderID)
	who := buyer{m.SaleVersion, m.SKU, m.UID}
	switch {
	case m.Type == sale.TypeOrder && cur != nil:
		redelivered := cur.Outcome // nothing changes
		redelivered.New = false
		b.out = append(b.out, redelivered)
	case m.Type == sale.TypeOrder:
		b.insert(b.order(m, who))
	case cur == nil:
		// The release overtook its order: store the order as cancelled, so that the order
		// itself, when it comes, is a redelivery that changes nothing.
		b.insert(&stored{Outcome: Outcome{OrderID: m.OrderID, SKU: m.SKU, Status: StatusCancelled, Reason: ReasonReleased, New: true}, buyer: who, qty: m.Qty})
	case cur.Status == StatusConfirmed:
		b.release(m, cur, isNew)
	default:
		b.out = append(b.out, Outcome{OrderID: cur.OrderID, SKU: cur.SKU, Status: cur.Status, Reason: cur.Reason}) // already cancelled, or never confirmed
	}
	last := &b.out[len(b.out)-1]
	last.Version, last.Home, last.UID, last.BoughtMs = m.SaleVersion, m.Home, m.UID, m.TS
}

// order decides a new order: confirmed if its row's stock covers it and its buyer holds none.
func (b *batch) order(m sale.Order, who buyer) *stored {
	o := &stored{Outcome: Outcome{OrderID: m.OrderID, SKU: m.SKU, Status: StatusConfirmed, New: true}, buyer: who, qty: m.Qty}
	row := b.rowOf(m)
	left, known := b.stock[row]
	switch {
	case !known:
		o.Status, o.Reason = StatusRejected, ReasonNoItem
	case b.confirmed[who]:
		o.Status, o.Reason = StatusRejected, ReasonDuplicate
	case left < m.Qty:
		o.Status, o.Reason = StatusRejected, ReasonSoldOut
	default:
		b.stock[row] = left - m.Qty
		b.taken[row] += m.Qty
		b.confirmed[who] = true
	}
	return o
}

func (b *batch) insert(o *stored) {
	b.inserts[o.OrderID] = o
	b.insertOrder = append(b.insertOrder, o.OrderID)
	b.out = append(b.out, o.Outcome)
}

// release cancels the confirmed order cur, which this batch inserts (isNew) or MySQL holds.
// The units go back to the release's row: its bucket's, as Redis gives them back.
func (b *batch) release(m sale.Order, cur *stored, isNew bool) {
	row := b.rowOf(m)
	b.stock[row] += cur.qty
	b.taken[row] -= cur.qty
	delete(b.confirmed, cur.buyer)
	if isNew {
		cur.Status, cur.Reason = StatusCancelled, ReasonReleased
	} else {
		b.cancels = append(b.cancels, cur.OrderID)
		b.existing[cur.OrderID] = stored{Outcome: Outcome{OrderID: cur.OrderID, SKU: cur.SKU, Status: StatusCancelled, Reason: ReasonReleased}, buyer: cur.buyer, qty: cur.qty}
	}
	b.out = append(b.out, Outcome{OrderID: cur.OrderID, SKU: cur.SKU, Status: StatusCancelled, Reason: ReasonReleased, New: true, Revoked: true})
}

// stockRow is a row that holds an item's stock: the item's own (bucket -1), or the row of
// one of its stock buckets (bucket: the tag number) while its sale is split.
type stockRow struct {
	sku    string
	bucket int
}

func (r stockRow) String() string {
	if r.bucket < 0 {
		return "sku " + r.sku
	}
	return fmt.Sprintf("sku %s bucket %d", r.sku, r.bucket)
}

// lockStock locks, in a fixed order (bucket rows, then items, each sorted), the rows whose
// stock msgs take or give back, so that two sinks cannot deadlock, and returns their stock and
// each message's row: its bucket's row if the item has one (a split sale), else the item's.
// A sink that drains one bucket locks that bucket's row alone.
func lockStock(ctx context.Context, tx *sql.Tx, msgs []sale.Order) (map[stockRow]int64, func(sale.Order) stockRow, error) {
	stock := map[stockRow]int64{}
	wantBuckets := map[stockRow]bool{}
	for _, m := range msgs {
		wantBuckets[stockRow{m.SKU, m.Bucket}] = true
	}
	buckets := sortedRows(wantBuckets)
	args := make([]any, 0, 2*len(buckets))
	for _, r := range buckets {
		args = append(args, r.sku, r.bucket)
	}
	if err := scan(ctx, tx, `SELECT sku, bucket, stock FROM seckill_item_buckets WHERE (sku, bucket) IN (`+
		strings.TrimSuffix(strings.Repeat("(?, ?),", len(buckets)), ",")+`) ORDER BY sku, bucket FOR UPDATE`,
		args, func(r *sql.Rows) error {
			var row stockRow
			var n int64
			err := r.Scan(&row.sku, &row.bucket, &n)
			stock[row] = n
			return err
		}); err != nil {
		return nil, nil, err
	}
	rowOf := func(m sale.Order) stockRow {
		if row := (stockRow{m.SKU, m.Bucket}); hasRow(stock, row) {
			return row
		}
		return stockRow{m.SKU, -1}
	}
	skuSet := map[string]bool{}
	for _, m := range msgs {
		if row := rowOf(m); row.bucket < 0 {
			skuSet[m.SKU] = true
		}
	}
	if len(skuSet) == 0 {
		return stock, rowOf, nil
	}
	skus := sortedKeys(skuSet)
	if err := scan(ctx, tx, `SELECT sku, stock FROM seckill_items WHERE sku IN (`+marks(len(skus))+`) ORDER BY sku FOR UPDATE`,
		anys(skus), func(r *sql.Rows) error {
			row := stockRow{bucket: -1}
			var n int64
			err := r.Scan(&row.sku, &n)
			stock[row] = n
			return err
		}); err != nil {
		return nil, nil, err
	}
	return stock, rowOf, nil
}

func hasRow(stock map[stockRow]int64, row stockRow) bool {
	_, ok := stock[row]
	return ok
}

// sortedRows are m's rows by sku, then bucket.
func sortedRows[V any](m map[stockRow]V) []stockRow {
	out := make([]stockRow, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b stockRow) int {
		if c := strings.Compare(a.sku, b.sku); c != 0 {
			return c
		}
		return cmp.Compare(a.bucket, b.bucket)
	})
	return out
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
