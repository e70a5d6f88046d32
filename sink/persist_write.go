package sink

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// write stores the batch's decisions: the new rows, the cancellations, and the stock taken
// from (or given back to) each row, refused by MySQL where it would go below 0.
func (b *batch) write(ctx context.Context, tx *sql.Tx) error {
	if len(b.insertOrder) > 0 {
		values := make([]string, 0, len(b.insertOrder))
		args := make([]any, 0, 7*len(b.insertOrder))
		for _, id := range b.insertOrder {
			o := b.inserts[id]
			values = append(values, "(?, ?, ?, ?, ?, ?, ?)")
			args = append(args, o.OrderID, o.SKU, o.uid, o.qty, o.version, o.Status, o.Reason)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO seckill_orders (order_id, sku, uid, qty, sale_version, status, reason) VALUES `+
			strings.Join(values, ", "), args...); err != nil {
			return err
		}
	}
	if len(b.cancels) > 0 {
		r, err := tx.ExecContext(ctx, `UPDATE seckill_orders SET status = ?, reason = ? WHERE status = ? AND order_id IN (`+marks(len(b.cancels))+`)`,
			append([]any{StatusCancelled, ReasonReleased, StatusConfirmed}, b.cancels...)...)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n != int64(len(b.cancels)) {
			return fmt.Errorf("%w: cancelled %d of %d orders", errStockMoved, n, len(b.cancels))
		}
	}
	for _, row := range sortedRows(b.taken) {
		if err := takeStock(ctx, tx, row, b.taken[row]); err != nil {
			return err
		}
	}
	return nil
}

// takeStock takes q units from row's stock (gives -q back when q is below 0).
func takeStock(ctx context.Context, tx *sql.Tx, row stockRow, q int64) error {
	table, where, args := "seckill_items", "sku = ?", []any{row.sku}
	if row.bucket >= 0 {
		table, where, args = "seckill_item_buckets", "sku = ? AND bucket = ?", []any{row.sku, row.bucket}
	}
	var r sql.Result
	var err error
	switch {
	case q > 0:
		r, err = tx.ExecContext(ctx, `UPDATE `+table+` SET stock = stock - ? WHERE `+where+` AND stock >= ?`, append(append([]any{q}, args...), q)...)
	case q < 0:
		r, err = tx.ExecContext(ctx, `UPDATE `+table+` SET stock = stock + ? WHERE `+where, append([]any{-q}, args...)...)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w: %s, taking %d", errStockMoved, row, q)
	}
	return nil
}
