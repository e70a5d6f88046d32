package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"seckill-proxy/guard"
)

// Metrics are the proxy's Prometheus metrics, served at /metrics on the admin port. The
// counters that INFO's seckill section shows are read at scrape time, each under the name the
// table below gives it, so that recording them costs the hot path nothing; the BUY latency
// histogram is observed once per buy. One sale's series (stock, outbox, buys by outcome) come
// for the sales this proxy has served that are not closed here, at most MaxSaleSeries.
type Metrics struct {
	reg        *prometheus.Registry
	buyLatency prometheus.Histogram
	pass       *passMetrics
	sampler    sampler // the live sale page's samples (RunSampler)
	fields     func() []guard.Field
	sales      func(ctx context.Context, most int) []guard.SaleMetrics
}

// MaxSaleSeries bounds the SKUs that get series of their own.
const MaxSaleSeries = 50

// fieldMetric is how one INFO field is exported.
type fieldMetric struct {
	name, help string
	gauge      bool
	outcome    string // the outcome label's value, for seckill_proxy_buys_total
}

// fieldMetrics maps INFO seckill's fields to metrics; a field not listed is not exported.
var fieldMetrics = map[string]fieldMetric{
	"proxy_connected_clients":          {name: "seckill_proxy_clients", help: "Client connections open now.", gauge: true},
	"proxy_total_connections_received": {name: "seckill_proxy_connections_total", help: "Client connections accepted."},
	"proxy_total_commands_processed":   {name: "seckill_proxy_commands_total", help: "Commands served, of every kind."},
	"auth_failures":                    {name: "seckill_proxy_auth_failures_total", help: "AUTH and HELLO AUTH attempts refused."},
	"auth_limited_source":              {name: "seckill_proxy_auth_limited_source_total", help: "AUTHs refused unchecked: too many failures from the source address."},
	"auth_limited_user":                {name: "seckill_proxy_auth_limited_user_total", help: "AUTHs refused unchecked: too many failures for the user."},
	"auth_revoked_sessions":            {name: "seckill_proxy_auth_revoked_total", help: "Connections closed because a reload removed or changed their user."},
	"buys":                             {name: "seckill_proxy_buy_requests_total", help: "SECKILL.BUY requests (and legacy stock script calls) that passed argument checks."},
	"buy_successes":                    {name: "seckill_proxy_buys_total", outcome: "order"},
	"buy_duplicates":                   {name: "seckill_proxy_buys_total", outcome: "duplicate"},
	"buy_soldout":                      {name: "seckill_proxy_buys_total", outcome: "soldout"},
	"buy_closed":                       {name: "seckill_proxy_buys_total", outcome: "closed"},
	"buy_unavailable":                  {name: "seckill_proxy_buys_total", outcome: "unavailable"},
	"buy_busy":                         {name: "seckill_proxy_buys_total", outcome: "busy"},
	"buy_drift":                        {name: "seckill_proxy_buys_total", outcome: "drift"},
	"buy_limited_rate":                 {name: "seckill_proxy_buys_total", outcome: "limited_rate"},
	"buy_limited_buyer":                {name: "seckill_proxy_buys_total", outcome: "limited_buyer"},
	"buy_limited_denied":               {name: "seckill_proxy_buys_total", outcome: "limited_denied"},
	"buy_answered_locally":             {name: "seckill_proxy_buys_answered_locally_total", help: "Buys answered from the sold-out or closed flag, with no Redis call."},
	"buy_known_duplicates":             {name: "seckill_proxy_buys_known_duplicates_total", help: "Buys answered DUPLICATE from the buyers this proxy sold to, with no Redis call."},
	"buy_shed":                         {name: "seckill_proxy_buys_shed_total", help: "Buys answered BUSY because admission.max_waiting_per_sku of their SKU's were waiting."},
	"buy_scripts":                      {name: "seckill_proxy_buy_scripts_total", help: "Buys sent to the buy script, retries included."},
	"wait_short":                       {name: "seckill_proxy_wait_short_total", help: "WAITs after the buy script that came back with fewer replicas than asked for."},
	"buy_no_sale_local":                {name: "seckill_proxy_buy_no_sale_local_total", help: "Buys of a SKU with no sale answered with no Redis call, from the SKUs the script recently found to have none."},
	"buy_limited_unknown_sku":          {name: "seckill_proxy_buy_limited_unknown_sku_total", help: "Buys of SKUs this proxy knew nothing of, LIMITED past admission.unknown_sku_rate (counted in the limited rate outcome too)."},
	"wait_off":                         {name: "seckill_proxy_wait_off_total", help: "WAITs that no replica acknowledged, each turning WAIT off on its master for a second."},
	"sale_events":                      {name: "seckill_proxy_sale_events_total", help: "Sale events heard from other proxies."},
	"sale_events_ignored":              {name: "seckill_proxy_sale_events_ignored_total", help: "Sale events that Redis did not bear out, or malformed."},
	"rate_leases":                      {name: "seckill_proxy_rate_leases_total", help: "Lease calls for a sale's rate tokens."},
	"rate_leased_tokens":               {name: "seckill_proxy_rate_leased_tokens_total", help: "Rate tokens the lease calls got."},
	"rate_lease_errors":                {name: "seckill_proxy_rate_lease_errors_total", help: "Lease calls that failed."},
	"denied_uids":                      {name: "seckill_proxy_denied_uids", help: "Uids on the deny list, as this proxy last read it.", gauge: true},
	"kafka_healthy":                    {name: "seckill_proxy_kafka_healthy", help: "1 while the tee's Kafka producer is taking orders.", gauge: true},
	"kafka_published":                  {name: "seckill_proxy_kafka_published_total", help: "Orders handed to the Kafka producer (sweeper republishes included)."},
	"kafka_acked":                      {name: "seckill_proxy_kafka_acked_total", help: "Orders Kafka acknowledged."},
	"kafka_failed":                     {name: "seckill_proxy_kafka_failed_total", help: "Orders Kafka refused or timed out (they stay in the outbox)."},
	"kafka_queued":                     {name: "seckill_proxy_kafka_queue", help: "Orders waiting for the Kafka producer.", gauge: true},
	"outbox_deleted":                   {name: "seckill_proxy_outbox_deleted_total", help: "Outbox entries deleted after Kafka's acknowledgement."},
	"outbox_republished":               {name: "seckill_proxy_outbox_republished_total", help: "Outbox entries the sweeper published again."},
	"outbox_buried":                    {name: "seckill_proxy_outbox_dead_total", help: "Unreadable outbox entries moved to the dead-letter stream."},
	"outbox_drifted":                   {name: "seckill_proxy_outbox_drifted_total", help: "Sweeps of a sale left alone because the sale's orders go to another topic than this proxy's."},
}

// NewMetrics returns the proxy's metrics: fields are INFO seckill's (Router.InfoFields), sales
// the per-sale figures (Guard.SaleMetrics).
func NewMetrics(fields func() []guard.Field, sales func(ctx context.Context, most int) []guard.SaleMetrics) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), fields: fields, sales: sales,
		buyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_proxy_buy_duration_seconds",
			Help:    "Time from reading a SECKILL.BUY to its answer being ready, whatever the outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		})}
	m.reg.MustRegister(m.buyLatency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
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

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// fieldCollector reads the INFO fields and the sales at scrape time. It is unchecked (it
// describes nothing), since which fields exist depends on what the proxy was built with.
type fieldCollector struct{ m *Metrics }

var (
	saleBuysDesc      = prometheus.NewDesc("seckill_proxy_sale_buys_total", "One open sale's buys on this proxy, by outcome.", []string{"sku", "outcome"}, nil)
	saleStockDesc     = prometheus.NewDesc("seckill_proxy_sale_stock", "Units left in the sale, in Redis.", []string{"sku"}, nil)
	saleOutboxDesc    = prometheus.NewDesc("seckill_proxy_sale_outbox_entries", "Orders in the sale's outbox: sold in Redis, not yet acknowledged by Kafka.", []string{"sku"}, nil)
	saleOutboxAgeDesc = prometheus.NewDesc("seckill_proxy_sale_outbox_oldest_age_seconds", "Age of the oldest entry of the sale's outbox (0 when empty).", []string{"sku"}, nil)
	saleLateDesc      = prometheus.NewDesc("seckill_proxy_sale_late_orders", "Orders of the sale sold outbox.late_after ago or more with no outcome from the sink, as the late-order watch last counted them.", []string{"sku"}, nil)
	// fieldDescs are fieldMetrics' descriptions, one per metric name.
	fieldDescs = func() map[string]*prometheus.Desc {
		out := map[string]*prometheus.Desc{}
		for _, fm := range fieldMetrics {
			if fm.outcome != "" {
				out[fm.name] = prometheus.NewDesc(fm.name, "Buys by outcome.", []string{"outcome"}, nil)
			} else {
				out[fm.name] = prometheus.NewDesc(fm.name, fm.help, nil, nil)
			}
		}
		return out
	}()
)

func (f *fieldCollector) Describe(chan<- *prometheus.Desc) {}

func (f *fieldCollector) Collect(ch chan<- prometheus.Metric) {
	for _, fl := range f.m.fields() {
		fm, ok := fieldMetrics[fl.Name]
		if !ok {
			continue
		}
		v, ok := fl.Value.(int64)
		if !ok {
			continue
		}
		kind := prometheus.CounterValue
		if fm.gauge {
			kind = prometheus.GaugeValue
		}
		var lv []string
		if fm.outcome != "" {
			lv = []string{fm.outcome}
		}
		ch <- prometheus.MustNewConstMetric(fieldDescs[fm.name], kind, float64(v), lv...)
	}
	if f.m.sales == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, s := range f.m.sales(ctx, MaxSaleSeries) {
		for _, o := range s.Outcomes {
			ch <- prometheus.MustNewConstMetric(saleBuysDesc, prometheus.CounterValue, float64(o.Count), s.SKU, o.Outcome)
		}
		ch <- prometheus.MustNewConstMetric(saleStockDesc, prometheus.GaugeValue, float64(s.Stock), s.SKU)
		ch <- prometheus.MustNewConstMetric(saleOutboxDesc, prometheus.GaugeValue, float64(s.Outbox), s.SKU)
		ch <- prometheus.MustNewConstMetric(saleOutboxAgeDesc, prometheus.GaugeValue, s.OutboxAge.Seconds(), s.SKU)
		ch <- prometheus.MustNewConstMetric(saleLateDesc, prometheus.GaugeValue, float64(s.Late), s.SKU)
	}
}
