package proxy

import (
	"context"
	_ "embed"
	"encoding/json"
	"math"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"seckill-proxy/guard"
	"seckill-proxy/sale"
)

// The live sale page: /sale on the admin port is a self-contained HTML page (no external
// assets) that polls /sale.json every second. For each sale this proxy served in the last 10
// minutes (guard.SaleMetrics) it shows the state (open, sold out, draining, over), the stock
// as a share of the sale's initial stock (so that a sale of 30,000 and one of 1,000,000 read
// alike), the orders still to be stored in MySQL and the time to drain them, and draws the
// buys per second by outcome, the BUY latency, and the time from buy to stored in MySQL (the
// sink's batches as they come) over the last minutes, each chart scaled to the sales shown. A
// sale shown only for its late orders, which other proxies left, goes under a folded "other
// open sales" line. The figures come from a sampler (Metrics.RunSampler) that reads the sales
// once a second, as /metrics does, and keeps the last saleHistory samples.

//go:embed salepage.html
var salePageHTML []byte

// saleHistory is how many one-second samples the page can show: ten minutes.
const saleHistory = 600

// saleSample is the state of the open sales at one moment.
type saleSample struct {
	T     int64                `json:"t"` // Unix milliseconds
	Sales map[string]saleState `json:"sales"`
	// P50 and P99 are the BUY latency of the buys answered since the sample before, in
	// milliseconds: the upper bound of the histogram bucket the quantile falls in (-1: none).
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// saleState is one sale's figures; Buys are counts since the proxy started, by outcome.
type saleState struct {
	// State is pageState's word; Served false marks a sale shown only for its late orders.
	State   string           `json:"state"`
	Served  bool             `json:"served"`
	Stock   int64            `json:"stock"`
	Initial int64            `json:"initial"`
	Pending int64            `json:"pending"`
	Late    int64            `json:"late"`
	Outbox  int64            `json:"outbox"`
	Buys    map[string]int64 `json:"buys"`
	// StoredMs and StoredMaxMs are the mean and the most of the time from buy to stored of the
	// last batch the sink stored, and StoredAt when (Unix ms); 0 before the first.
	StoredMs    float64 `json:"stored_ms"`
	StoredMaxMs float64 `json:"stored_max_ms"`
	StoredAt    int64   `json:"stored_at"`
	// RateStarvedMs: the sale's buys refused for want of a rate token while the lease call
	// was out (guard.SaleMetrics.RateStarved).
	RateStarvedMs float64 `json:"rate_starved_ms"`
}

// sampler keeps the samples the page shows.
type sampler struct {
	mu       sync.Mutex
	interval time.Duration
	samples  []saleSample
	prev     []uint64 // the BUY histogram's cumulative bucket counts at the last sample
}

// RunSampler samples the open sales and the BUY latency every interval until ctx ends.
func (m *Metrics) RunSampler(ctx context.Context, interval time.Duration) {
	m.sampler.mu.Lock()
	m.sampler.interval = interval
	m.sampler.mu.Unlock()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		m.sample(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample takes one sample.
func (m *Metrics) sample(ctx context.Context, now time.Time) {
	s := saleSample{T: now.UnixMilli(), Sales: map[string]saleState{}, P50: -1, P99: -1}
	if m.sales != nil {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		for _, sm := range m.saleFigures(sctx, 0) {
			st := saleState{State: pageState(sm), Served: sm.Served, Stock: sm.Stock, Initial: sm.Initial, Pending: sm.Pending,
				Late: sm.Late, Outbox: sm.Outbox, Buys: map[string]int64{},
				StoredMs: float64(sm.StoredDelay.Microseconds()) / 1000, StoredMaxMs: float64(sm.StoredDelayMax.Microseconds()) / 1000,
				RateStarvedMs: float64(sm.RateStarved.Microseconds()) / 1000}
			if !sm.StoredAt.IsZero() {
				st.StoredAt = sm.StoredAt.UnixMilli()
			}
			for _, o := range sm.Outcomes {
				st.Buys[o.Outcome] = o.Count
			}
			s.Sales[sm.SKU] = st
		}
		cancel()
	}
	var h dto.Metric
	if err := m.buyLatency.Write(&h); err == nil && h.Histogram != nil {
		bounds := make([]float64, 0, len(h.Histogram.Bucket))
		counts := make([]uint64, 0, len(h.Histogram.Bucket)+1)
		for _, b := range h.Histogram.Bucket {
			bounds = append(bounds, b.GetUpperBound())
			counts = append(counts, b.GetCumulativeCount())
		}
		counts = append(counts, h.Histogram.GetSampleCount()) // +Inf
		m.sampler.mu.Lock()
		if len(m.sampler.prev) == len(counts) {
			s.P50 = quantileMS(bounds, counts, m.sampler.prev, 0.50)
			s.P99 = quantileMS(bounds, counts, m.sampler.prev, 0.99)
		}
		m.sampler.prev = counts
		m.sampler.mu.Unlock()
	}
	m.sampler.mu.Lock()
	defer m.sampler.mu.Unlock()
	if len(m.sampler.samples) == saleHistory {
		m.sampler.samples = append(m.sampler.samples[:0], m.sampler.samples[1:]...)
	}
	m.sampler.samples = append(m.sampler.samples, s)
}

// pageState is the sale's state in an operator's words: open, sold out, draining (closed,
// with orders MySQL has still to store or still in the outbox), over, or Redis's own word for
// another (warming).
func pageState(sm guard.SaleMetrics) string {
	switch sm.State {
	case sale.StateOpen:
		if sm.Stock > 0 {
			return "open"
		}
		return "sold out"
	case sale.StateClosed:
		if sm.Pending > 0 || sm.Outbox > 0 {
			return "draining"
		}
		return "over"
	}
	return sm.State
}

// quantileMS is the upper bound, in milliseconds, of the bucket where quantile q of the
// samples counted between prev and now falls; -1 when there are none. A quantile past the
// last finite bound is that bound.
func quantileMS(bounds []float64, now, prev []uint64, q float64) float64 {
	total := now[len(now)-1] - prev[len(prev)-1]
	if total == 0 {
		return -1
	}
	rank := uint64(math.Ceil(q * float64(total)))
	for i, b := range bounds {
		if now[i]-prev[i] >= rank {
			return b * 1000
		}
	}
	return bounds[len(bounds)-1] * 1000
}

// salePage serves the page; saleJSON its data.
func salePage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
	_, _ = w.Write(salePageHTML)
}

func (m *Metrics) saleJSON(w http.ResponseWriter, _ *http.Request) {
	m.sampler.mu.Lock()
	out := struct {
		Interval int64        `json:"interval_ms"`
		Samples  []saleSample `json:"samples"`
	}{Interval: m.sampler.interval.Milliseconds(), Samples: append([]saleSample(nil), m.sampler.samples...)}
	m.sampler.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}
