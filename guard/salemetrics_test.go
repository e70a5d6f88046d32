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
	bucket := func(stock string, outbox int64, stored []any, oldestMs string, buyers, outcomes int64) saleReads {
		var oldest []redis.XMessage
		if oldestMs != "" {
			oldest = []redis.XMessage{{ID: oldestMs + "-0"}}
		}
		return saleReads{stock: redis.NewStringResult(stock, nil), outbox: redis.NewIntResult(outbox, nil),
			stored: redis.NewSliceResult(stored, nil), oldest: redis.NewXMessageSliceCmdResult(oldest, nil),
			buyers: redis.NewIntResult(buyers, nil), outcomes: redis.NewIntResult(outcomes, nil)}
	}
	var m SaleMetrics
	for _, r := range []saleReads{
		bucket("10", 2, []any{"5", "9", "999000", "400"}, "998000", 5, 3),
		bucket("7", 1, []any{"20", "40", "999500", "300"}, "999900", 1, 2),
		bucket("x", 0, []any{nil, nil, nil, nil}, "", 0, 0),
	} {
		r.addTo(&m, now)
	}
	if m.Stock != 17 || m.Outbox != 3 || m.Initial != 700 || m.Pending != 2 {
		t.Errorf("stock %d, outbox %d, initial %d, pending %d; want 17, 3, 700, 2 (a bucket with more outcomes than buyers adds none)",
			m.Stock, m.Outbox, m.Initial, m.Pending)
	}
	if m.StoredDelay != 20*time.Millisecond || m.StoredDelayMax != 40*time.Millisecond || !m.StoredAt.Equal(time.UnixMilli(999500)) {
		t.Errorf("stored %v/%v at %v; want the latest batch's 20ms/40ms at 999500", m.StoredDelay, m.StoredDelayMax, m.StoredAt.UnixMilli())
	}
	if m.OutboxAge != 2*time.Second {
		t.Errorf("outbox age %v, want the oldest entry's 2s", m.OutboxAge)
	}
}
