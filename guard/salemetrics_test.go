package guard

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSaleReadsAddUp: a split sale's figures are its buckets' summed (stock, outbox), the
// latest stored batch of any bucket, and the oldest outbox entry of any; a bucket with
// nothing stored yet or a malformed figure adds nothing.
func TestSaleReadsAddUp(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	bucket := func(stock string, outbox int64, stored []any, oldestMs string) saleReads {
		var oldest []redis.XMessage
		if oldestMs != "" {
			oldest = []redis.XMessage{{ID: oldestMs + "-0"}}
		}
		return saleReads{stock: redis.NewStringResult(stock, nil), outbox: redis.NewIntResult(outbox, nil),
			stored: redis.NewSliceResult(stored, nil), oldest: redis.NewXMessageSliceCmdResult(oldest, nil)}
	}
	var m SaleMetrics
	for _, r := range []saleReads{
		bucket("10", 2, []any{"5", "9", "999000"}, "998000"),
		bucket("7", 1, []any{"20", "40", "999500"}, "999900"),
		bucket("x", 0, []any{nil, nil, nil}, ""),
	} {
		r.addTo(&m, now)
	}
	if m.Stock != 17 || m.Outbox != 3 {
		t.Errorf("stock %d, outbox %d; want 17, 3", m.Stock, m.Outbox)
	}
	if m.StoredDelay != 20*time.Millisecond || m.StoredDelayMax != 40*time.Millisecond || !m.StoredAt.Equal(time.UnixMilli(999500)) {
		t.Errorf("stored %v/%v at %v; want the latest batch's 20ms/40ms at 999500", m.StoredDelay, m.StoredDelayMax, m.StoredAt.UnixMilli())
	}
	if m.OutboxAge != 2*time.Second {
		t.Errorf("outbox age %v, want the oldest entry's 2s", m.OutboxAge)
	}
}
