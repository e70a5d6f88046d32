package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"seckill-proxy/sale"
)

// TestClosedAnsweredLocally: a proxy that missed a sale's close (here the sale is closed in
// Redis behind its back, with no event) learns it from the first buy's CLOSED reply, and
// answers the buys after it from its flag: at most 1 in 20 reaches Redis, as for a sold-out
// sale, and every buyer is told CLOSED.
func TestClosedAnsweredLocally(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	c := s.client(t, 1)
	sku := newSKU("closedflag")
	s.sale(t, c, sku, 100)
	if err := c.Do(ctx, "seckill.buy", sku, "first").Err(); err != nil {
		t.Fatalf("a buy in the open sale: %v", err)
	}
	if err := s.rc.HSet(ctx, sale.KeysFor(sku).Meta, "state", sale.StateClosed).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 200
	before := s.g.Stats().Scripts
	for i := range n {
		err := c.Do(ctx, "seckill.buy", sku, "late"+strconv.Itoa(i)).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "CLOSED") {
			t.Fatalf("buy %d of a closed sale: %v; want CLOSED", i, err)
		}
	}
	if sent := s.g.Stats().Scripts - before; sent > n/20 {
		t.Fatalf("%d of %d buys of a closed sale went to Redis; want at most 1 in 20", sent, n)
	}
}
