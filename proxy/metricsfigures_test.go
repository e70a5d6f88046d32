package proxy

import (
	"context"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill-proxy/guard"
	"seckill-proxy/sale"
)

// TestScrapesShareTheSalesFigures: however many peers scrape /metrics at once and however
// often, the sales' figures are read from Redis at most once per salesMaxAge. Before, each
// scrape read them: 4 scrapers made 39,920 Redis commands a second.
func TestScrapesShareTheSalesFigures(t *testing.T) {
	var reads atomic.Int64
	m := NewMetrics(func() []guard.Field { return nil }, func(context.Context, int) []guard.SaleMetrics {
		reads.Add(1)
		return []guard.SaleMetrics{{SKU: "phone", State: sale.StateOpen, Stock: 7}}
	})
	h := m.Handler()
	start := time.Now()
	var wg sync.WaitGroup
	var served atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 50 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
				if rec.Code == 200 {
					served.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if served.Load() == 0 {
		t.Fatal("no scrape was served")
	}
	elapsed := time.Since(start)
	if n, most := reads.Load(), 1+int64(elapsed/salesMaxAge); n > most {
		t.Errorf("%d scrapes in %v read the sales %d times, want at most %d", served.Load(), elapsed, n, most)
	}
}
