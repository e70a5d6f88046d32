package proxy

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"seckill-proxy/guard"
	"seckill-proxy/internal/tlsfiles"
	"seckill-proxy/sale"
)

// Metrics are the proxy's Prometheus metrics, served at /metrics on the admin port. The
// counters that INFO's seckill section shows are read at scrape time, each under the metric
// its guard.Field names (the name stands beside the counter, where the field is made), so
// that recording them costs the hot path nothing; the BUY latency
// histogram is observed once per buy. One sale's series (stock, outbox, buys by outcome) come
// for the sales this proxy has served that are not closed here, at most MaxSaleSeries, from the
// figures the sampler read (saleFigures): a scrape reads Redis only when they are older than
// salesMaxAge and no one else is reading them, so that scrapers cannot multiply Redis's load.
type Metrics struct {
	reg        *prometheus.Registry
	descs      sync.Map // metric name -> *prometheus.Desc
	buyLatency prometheus.Histogram
	pass       *passMetrics
	sampler    sampler // the live sale page's samples (RunSampler)
	fields     func() []guard.Field
	sales      func(ctx context.Context, most int) []guard.SaleMetrics
	figures    saleFigures
}

// saleFigures are the sales' figures last read from Redis, which every scrape and the sampler
// share: Redis is read for them at most once per salesMaxAge, and by one caller at a time,
// however many peers scrape.
type saleFigures struct {
	mu      sync.Mutex
	at      time.Time
	sales   []guard.SaleMetrics
	reading bool
}

// salesMaxAge is how old the sales' figures a scrape gets may be.
const salesMaxAge = time.Second

// saleFigures are the sales' figures: the last read's while it is younger than maxAge or
// another caller is reading them, else a new read's (at most MaxSaleSeries sales).
func (m *Metrics) saleFigures(ctx context.Context, maxAge time.Duration) []guard.SaleMetrics {
	f := &m.figures
	f.mu.Lock()
	if f.reading || (!f.at.IsZero() && time.Since(f.at) < maxAge) {
		defer f.mu.Unlock()
		return f.sales
	}
	f.reading = true
	f.mu.Unlock()
	sales := m.sales(ctx, MaxSaleSeries)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sales, f.at, f.reading = sales, time.Now(), false
	return sales
}

// MaxSaleSeries bounds the SKUs that get series of their own.
const MaxSaleSeries = 50

// NewMetrics returns the proxy's metrics: fields are INFO seckill's (Router.InfoFields), sales
// the per-sale figures (Guard.SaleMetrics).
func NewMetrics(fields func() []guard.Field, sales func(ctx context.Context, most int) []guard.SaleMetrics) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), fields: fields, sales: sales,
		buyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_proxy_buy_duration_seconds",
			Help:    "Time from reading a SECKILL.BUY to its answer being ready, whatever the outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		})}
	m.reg.MustRegister(m.buyLatency, collectors.NewGoCollector(), tlsfiles.Collector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&fieldCollector{m: m})
	m.pass = newPassMetrics(m.reg)
	return m
}

// ObservePass records a pass-through command served off the event loop (the router's
// Options.ObservePass).
func (m *Metrics) ObservePass(args [][]byte, reply []byte, d time.Duration) {
	if m != nil {
		m.pass.offLoop(args, reply, d)
	}
}

// ObserveBuy records one buy's latency.
func (m *Metrics) ObserveBuy(d time.Duration) {
	if m != nil {
		m.buyLatency.Observe(d.Seconds())
	}
}

// maxScrapes bounds the scrapes served at once; past it, 503 (and each peer has at most
// adminhttp.MaxPeerInFlight).
const maxScrapes = 8

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, MaxRequestsInFlight: maxScrapes})
}

// fieldCollector reads the INFO fields and the sales at scrape time. It is unchecked (it
// describes nothing), since which fields exist depends on what the proxy was built with.
type fieldCollector struct{ m *Metrics }

var (
	saleBuysDesc      = prometheus.NewDesc("seckill_proxy_sale_buys_total", "One open sale's buys on this proxy, by outcome.", []string{"sku", "outcome"}, nil)
	saleStockDesc     = prometheus.NewDesc("seckill_proxy_sale_stock", "Units left in the sale, in Redis.", []string{"sku"}, nil)
	saleOutboxDesc    = prometheus.NewDesc("seckill_proxy_sale_outbox_entries", "Orders in the sale's outbox: sold in Redis, not yet acknowledged by Kafka.", []string{"sku"}, nil)
	saleOutboxAgeDesc = prometheus.NewDesc("seckill_proxy_sale_outbox_oldest_age_seconds", "Age of the oldest entry of the sale's outbox (0 when empty).", []string{"sku"}, nil)
	saleStoredDesc    = prometheus.NewDesc("seckill_proxy_sale_stored_delay_seconds", "Time from buy to stored in MySQL of the last batch of the sale's orders the sink stored: its mean (stat=mean) and most (stat=max), by Redis's clock.", []string{"sku", "stat"}, nil)
	saleLateDesc      = prometheus.NewDesc("seckill_proxy_sale_late_orders", "Orders of the sale sold outbox.late_after ago or more with no outcome from the sink, as the late-order watch last counted them.", []string{"sku"}, nil)
)

// desc is the description of the metric that m names; buys by outcome share one, labelled.
func (m *Metrics) desc(fm *guard.Metric) *prometheus.Desc {
	if d, ok := m.descs.Load(fm.Name); ok {
		return d.(*prometheus.Desc)
	}
	var d *prometheus.Desc
	if fm.Outcome != "" {
		d = prometheus.NewDesc(fm.Name, "Buys by outcome.", []string{"outcome"}, nil)
	} else {
		d = prometheus.NewDesc(fm.Name, fm.Help, nil, nil)
	}
	actual, _ := m.descs.LoadOrStore(fm.Name, d)
	return actual.(*prometheus.Desc)
}

func (f *fieldCollector) Describe(chan<- *prometheus.Desc) {}

func (f *fieldCollector) Collect(ch chan<- prometheus.Metric) {
	for _, fl := range f.m.fields() {
		fm := fl.Metric
		if fm == nil {
			continue
		}
		var v float64
		switch n := fl.Value.(type) {
		case int64:
			v = float64(n)
		case float64:
			v = n
		default:
			continue
		}
		kind := prometheus.CounterValue
		if fm.Gauge {
			kind = prometheus.GaugeValue
		}
		var lv []string
		if fm.Outcome != "" {
			lv = []string{fm.Outcome}
		}
		ch <- prometheus.MustNewConstMetric(f.m.desc(fm), kind, v, lv...)
	}
	if f.m.sales == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, s := range f.m.saleFigures(ctx, salesMaxAge) {
		if s.State != sale.StateOpen && s.Late == 0 {
			continue // an ended sale has series while it has late orders
		}
		for _, o := range s.Outcomes {
			ch <- prometheus.MustNewConstMetric(saleBuysDesc, prometheus.CounterValue, float64(o.Count), s.SKU, o.Outcome)
		}
		ch <- prometheus.MustNewConstMetric(saleStockDesc, prometheus.GaugeValue, float64(s.Stock), s.SKU)
		ch <- prometheus.MustNewConstMetric(saleOutboxDesc, prometheus.GaugeValue, float64(s.Outbox), s.SKU)
		ch <- prometheus.MustNewConstMetric(saleOutboxAgeDesc, prometheus.GaugeValue, s.OutboxAge.Seconds(), s.SKU)
		ch <- prometheus.MustNewConstMetric(saleLateDesc, prometheus.GaugeValue, float64(s.Late), s.SKU)
		if !s.StoredAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(saleStoredDesc, prometheus.GaugeValue, s.StoredDelay.Seconds(), s.SKU, "mean")
			ch <- prometheus.MustNewConstMetric(saleStoredDesc, prometheus.GaugeValue, s.StoredDelayMax.Seconds(), s.SKU, "max")
		}
	}
}
