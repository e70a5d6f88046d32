package sink

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rs/xid"
	"go.uber.org/zap"

	"seckill-proxy/internal/schema"
	"seckill-proxy/internal/testenv"
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
	})
	return sku
}

func order(sku, uid string, qty int64) Order {
	return Order{V: MessageVersion, Type: TypeOrder, OrderID: xid.New().String(), SaleVersion: 1, SKU: sku, UID: uid, Qty: qty, TS: 1}
}

func stockOf(t *testing.T, db *sql.DB, sku string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(`SELECT stock FROM seckill_items WHERE sku = ?`, sku).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
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
	batch := []Order{a, aAgain, b, a, c, d} // a twice: the tee and the sweeper both sent it

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

func TestDecodeOrder(t *testing.T) {
	good := order("sku_1", "u1", 1)
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"good", string(good.Encode()), true},
		{"not json", "{", false},
		{"other version", `{"v":2,"type":"order","order_id":"x","sale_version":1,"sku":"s","uid":"u","qty":1}`, false},
		{"other type", `{"v":1,"type":"refund","order_id":"x","sale_version":1,"sku":"s","uid":"u","qty":1}`, false},
		{"no order id", `{"v":1,"type":"order","sale_version":1,"sku":"s","uid":"u","qty":1}`, false},
		{"bad sku", `{"v":1,"type":"order","order_id":"x","sale_version":1,"sku":"s s","uid":"u","qty":1}`, false},
		{"zero qty", `{"v":1,"type":"order","order_id":"x","sale_version":1,"sku":"s","uid":"u","qty":0}`, false},
		{"no version", `{"v":1,"type":"order","order_id":"x","sku":"s","uid":"u","qty":1}`, false},
	}
	for _, tt := range tests {
		o, err := DecodeOrder([]byte(tt.in))
		if tt.ok != (err == nil) {
			t.Errorf("%s: %v", tt.name, err)
		}
		if tt.ok && o != good {
			t.Errorf("%s: decoded %+v, want %+v", tt.name, o, good)
		}
	}
}

// FuzzDecodeOrder: never panics, and what it accepts re-encodes to an equal order.
func FuzzDecodeOrder(f *testing.F) {
	o := order("sku_1", "u1", 2)
	f.Add(o.Encode())
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeOrder(b)
		if err != nil {
			return
		}
		again, err := DecodeOrder(got.Encode())
		if err != nil || again != got {
			t.Fatalf("round trip: %+v -> %+v, %v", got, again, err)
		}
	})
}

// BenchmarkPersist measures the sink's MySQL side: orders per second into MariaDB with the
// hard stock constraint, in batches of 1,000 (the default sink.batch_size), against one order
// per transaction (the anchor).
func BenchmarkPersist(b *testing.B) {
	for _, size := range []int{1, 1000} {
		b.Run("batch="+strconv.Itoa(size), func(b *testing.B) {
			db := migrated(b)
			sku := newItem(b, db, b.N)
			orders := make([]Order, b.N)
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

func BenchmarkEncodeOrder(b *testing.B) {
	o := order("sku_1001", "user_123456", 1)
	b.ReportAllocs()
	for b.Loop() {
		_ = o.Encode()
	}
}

// FuzzEncodeOrder: the hand-written Encode is byte for byte json.Marshal, whatever the
// strings hold.
func FuzzEncodeOrder(f *testing.F) {
	f.Add("order", "dc6f2p1ksdu8am6vpjd0", "sku_1001", "user_42", "host:4242", int64(1), int64(2), int64(1764474339124))
	f.Add("release", "id\"quoted\\", "<sku>&", "ü\x00\x7f", "\xff\u2028", int64(-1), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, typ, id, sku, uid, proxy string, version, qty, ts int64) {
		o := Order{V: MessageVersion, Type: typ, OrderID: id, SaleVersion: version, SKU: sku, UID: uid, Qty: qty, TS: ts, Proxy: proxy}
		want, err := json.Marshal(&o)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Encode(); !bytes.Equal(got, want) {
			t.Fatalf("Encode = %s\njson.Marshal = %s", got, want)
		}
	})
}
