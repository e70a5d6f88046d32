package sink

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rs/xid"
	"go.uber.org/zap"

	"seckill-proxy/internal/schema"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/sale"
)

func migrated(t testing.TB) *sql.DB {
	t.Helper()
	db := testenv.MySQL(t)
	if _, err := schema.Migrate(context.Background(), db, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	return db
}

func newItem(t testing.TB, db *sql.DB, stock int) string {
	t.Helper()
	sku := "p_" + xid.New().String()
	if _, err := db.Exec(`INSERT INTO seckill_items (sku, stock) VALUES (?, ?)`, sku, stock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec(`DELETE FROM seckill_orders WHERE sku = ?`, sku)
		_, _ = db.Exec(`DELETE FROM seckill_items WHERE sku = ?`, sku)
		_, _ = db.Exec(`DELETE FROM seckill_item_buckets WHERE sku = ?`, sku)
	})
	return sku
}

func order(sku, uid string, qty int64) sale.Order {
	return sale.Order{V: sale.MessageVersion, Type: sale.TypeOrder, OrderID: xid.New().String(), SaleVersion: 1, SKU: sku, UID: uid, Qty: qty, TS: 1}
}

func stockOf(t *testing.T, db *sql.DB, sku string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(`SELECT stock FROM seckill_stock WHERE sku = ?`, sku).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPersistBuckets: a split sale's orders are charged to the rows of the buckets that sold
// them; a bucket with too few units rejects its order even while other buckets hold stock (no
// batch takes a bucket below zero); a release gives its units back to its own bucket's row;
// and the total stays one query.
func TestPersistBuckets(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	sku := newItem(t, db, 0)
	if _, err := db.Exec(`INSERT INTO seckill_item_buckets (sku, bucket, stock) VALUES (?, 0, 2), (?, 5, 1)`, sku, sku); err != nil {
		t.Fatal(err)
	}
	a, b, c, d := order(sku, "a", 1), order(sku, "b", 1), order(sku, "c", 1), order(sku, "d", 1)
	b.Bucket, c.Bucket, d.Bucket, d.Home = 5, 5, 0, 5 // d: bucket 0 gave a unit to a buyer of bucket 5
	got, err := Persist(ctx, db, []sale.Order{a, b, c, d})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{StatusConfirmed, StatusConfirmed, StatusRejected, StatusConfirmed}
	for i, o := range got {
		if o.Status != want[i] {
			t.Errorf("order %d: %s %s, want %s", i, o.Status, o.Reason, want[i])
		}
	}
	if got[2].Reason != ReasonSoldOut || got[3].Home != 5 {
		t.Errorf("c's reason %q (want %q), d's home %d (want 5)", got[2].Reason, ReasonSoldOut, got[3].Home)
	}
	rows := func() (b0, b5 int64) {
		if err := db.QueryRow(`SELECT (SELECT stock FROM seckill_item_buckets WHERE sku = ? AND bucket = 0),
			(SELECT stock FROM seckill_item_buckets WHERE sku = ? AND bucket = 5)`, sku, sku).Scan(&b0, &b5); err != nil {
			t.Fatal(err)
		}
		return b0, b5
	}
	if b0, b5 := rows(); b0 != 0 || b5 != 0 || stockOf(t, db, sku) != 0 {
		t.Fatalf("rows after the batch: bucket 0 %d, bucket 5 %d, total %d; want 0, 0, 0", b0, b5, stockOf(t, db, sku))
	}
	rel := b
	rel.Type = sale.TypeRelease
	if _, err := Persist(ctx, db, []sale.Order{rel}); err != nil {
		t.Fatal(err)
	}
	if b0, b5 := rows(); b0 != 0 || b5 != 1 || stockOf(t, db, sku) != 1 {
		t.Fatalf("rows after b's release: bucket 0 %d, bucket 5 %d, total %d; want 0, 1, 1", b0, b5, stockOf(t, db, sku))
	}
}

// TestPersistSemantics: one batch keeps every order's own-transaction semantics.
func TestPersistSemantics(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	sku := newItem(t, db, 5)
	a := order(sku, "alice", 2)
	aAgain := order(sku, "alice", 1) // same buyer, another order id: the second is a duplicate buyer
	b := order(sku, "bob", 3)
	c := order(sku, "carol", 1) // stock is gone by now
	d := order(sku, "dave", 1)
	d.SKU = "p_no_such_item"
	batch := []sale.Order{a, aAgain, b, a, c, d} // a twice: the tee and the sweeper both sent it

	got, err := Persist(ctx, db, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ id, status, reason string }{
		{a.OrderID, StatusConfirmed, ""},
		{aAgain.OrderID, StatusRejected, ReasonDuplicate},
		{b.OrderID, StatusConfirmed, ""},
		{c.OrderID, StatusRejected, ReasonSoldOut},
		{d.OrderID, StatusRejected, ReasonNoItem},
	}
	if len(got) != len(want) {
		t.Fatalf("%d outcomes, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].OrderID != w.id || got[i].Status != w.status || got[i].Reason != w.reason || !got[i].New {
			t.Errorf("outcome %d = %+v, want %+v", i, got[i], w)
		}
	}
	if n := stockOf(t, db, sku); n != 0 {
		t.Fatalf("stock %d, want 0", n)
	}

	// Redelivery of the whole batch changes nothing and reports the stored outcomes.
	again, err := Persist(ctx, db, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range again {
		if o.New || o.Status != got[i].Status || o.Reason != got[i].Reason {
			t.Errorf("redelivered outcome %d = %+v, want the stored %+v", i, o, got[i])
		}
	}
	var rows int
	if err := db.QueryRow(`SELECT COUNT(*) FROM seckill_orders WHERE order_id IN (?, ?, ?, ?, ?)`,
		a.OrderID, aAgain.OrderID, b.OrderID, c.OrderID, d.OrderID).Scan(&rows); err != nil || rows != 5 {
		t.Fatalf("%d rows (%v), want 5", rows, err)
	}
}

// TestStockCannotGoNegative: the column itself refuses it, whatever the caller does.
func TestStockCannotGoNegative(t *testing.T) {
	db := migrated(t)
	sku := newItem(t, db, 1)
	if _, err := db.Exec(`UPDATE seckill_items SET stock = stock - 2 WHERE sku = ?`, sku); err == nil {
		t.Fatal("MySQL took stock below zero")
	}
	if n := stockOf(t, db, sku); n != 1 {
		t.Fatalf("stock %d, want 1", n)
	}
}

// BenchmarkPersist measures the sink's MySQL side: orders per second into MariaDB with the
// hard stock constraint, in batches of 1,000 (the default sink.batch_size), against one order
// per transaction (the anchor).
func BenchmarkPersist(b *testing.B) {
	for _, size := range []int{1, 1000} {
		b.Run("batch="+strconv.Itoa(size), func(b *testing.B) {
			db := migrated(b)
			sku := newItem(b, db, b.N)
			orders := make([]sale.Order, b.N)
			for i := range orders {
				orders[i] = order(sku, fmt.Sprintf("u%d", i), 1)
			}
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < len(orders); i += size {
				if _, err := Persist(ctx, db, orders[i:min(i+size, len(orders))]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "orders/s")
		})
	}
}

// TestOutcomeCalls: a batch's outcomes become one outcome.lua call per home bucket (another
// one past maxOutcomesPerCall), each with the outcome stream's cap, then its orders in the
// batch's order and 9 values apiece.
func TestOutcomeCalls(t *testing.T) {
	var outs []Outcome
	for i := range maxOutcomesPerCall + 3 {
		outs = append(outs, Outcome{OrderID: "a" + strconv.Itoa(i), SKU: "s", Status: StatusConfirmed, New: true, Version: 1})
	}
	outs = append(outs, Outcome{OrderID: "b", SKU: "s", Home: 4, Status: StatusRejected, Reason: ReasonSoldOut, Version: 1, UID: "u1", BoughtMs: 1700000000123},
		Outcome{OrderID: "c", SKU: "t", Status: StatusCancelled, Revoked: true, New: true, Version: 2, UID: "u2"})
	calls := outcomeCalls(outs)
	want := []struct {
		keys   sale.Keys
		orders int
	}{{sale.KeysFor("s"), maxOutcomesPerCall}, {sale.KeysFor("s"), 3}, {sale.BucketKeys("s", 4), 1}, {sale.KeysFor("t"), 1}}
	if len(calls) != len(want) {
		t.Fatalf("%d calls, want %d", len(calls), len(want))
	}
	for i, w := range want {
		if calls[i].keys != w.keys || len(calls[i].args) != 1+w.orders*outcomeArgs {
			t.Errorf("call %d: keys %v, %d args; want %v, %d", i, calls[i].keys.Result, len(calls[i].args), w.keys.Result, 1+w.orders*outcomeArgs)
		}
	}
	if got := fmt.Sprint(calls[2].args); got != "[10000 b rejected "+ReasonSoldOut+" 1 rejected 0 0 u1 rejected b "+ReasonSoldOut+" 1700000000123]" {
		t.Errorf("b's values: %s", got)
	}
	if got := fmt.Sprint(calls[3].args); got != "[10000 c cancelled 2 cancelled 1 1 u2 cancelled c 0]" {
		t.Errorf("c's values: %s", got)
	}
	if calls[1].args[1] != "a"+strconv.Itoa(maxOutcomesPerCall) {
		t.Errorf("the second call starts with %v, want the order after the first call's", calls[1].args[1])
	}
}
