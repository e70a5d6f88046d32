package sale

import (
	"bytes"
	"encoding/json"
	"testing"
)

func order(sku, uid string, qty int64) Order {
	return Order{V: MessageVersion, Type: TypeOrder, OrderID: "o-" + uid, SaleVersion: 1, SKU: sku, UID: uid, Qty: qty, TS: 1764474339124, Proxy: "test"}
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
		o := Order{V: MessageVersion, Type: typ, OrderID: id, SaleVersion: version, SKU: sku, UID: uid, Qty: qty, TS: ts, Proxy: proxy,
			Bucket: int(version % 17), Home: int(ts % 5)}
		want, err := json.Marshal(&o)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Encode(); !bytes.Equal(got, want) {
			t.Fatalf("Encode = %s\njson.Marshal = %s", got, want)
		}
	})
}
