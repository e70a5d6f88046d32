package sink

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"seckill-proxy/internal/tlsfiles"
	"seckill-proxy/sale"
)

// The sink's metrics, served at /metrics on sink.admin_listen: its counters, read at scrape
// time; the batch latency histogram; and the consumer lag of each partition it holds (the
// partition's high-water mark less the next offset it will read, as of its last batch).

var (
	ordersDesc      = prometheus.NewDesc("seckill_sink_orders_total", "Orders the sink handled, by outcome: confirmed, rejected (MySQL's stock did not cover it, or a duplicate buyer), cancelled (a release), redelivered (already stored; nothing changed).", []string{"outcome"}, nil)
	batchesDesc     = prometheus.NewDesc("seckill_sink_batches_total", "MySQL transactions committed.", nil, nil)
	retriesDesc     = prometheus.NewDesc("seckill_sink_retries_total", "Attempts that failed and were retried (MySQL, Kafka, Redis).", nil, nil)
	deadLettersDesc = prometheus.NewDesc("seckill_sink_dead_letters_total", "Messages no one could read, sent to the dead-letter topic.", nil, nil)
	claimedDesc     = prometheus.NewDesc("seckill_sink_partitions_claimed", "Partitions this sink holds in its consumer group session; -1 while it is in none (joining, rebalancing).", nil, nil)
	lagDesc         = prometheus.NewDesc("seckill_sink_consumer_lag", "Messages of a partition this sink holds that it has not read yet.", []string{"topic", "partition"}, nil)
	topicDesc       = prometheus.NewDesc("seckill_sink_consuming", "1 for the topic, group and message version this sink consumes (0 while it waits for MySQL, Redis or Kafka at start).", []string{"topic", "group", "schema"}, nil)
	saleOrdersDesc  = prometheus.NewDesc("seckill_sink_sale_orders_total", "Orders and releases this sink handled, by sale (at most 256 sales by name; the rest as sku=\"other\").", []string{"sku"}, nil)
)

// maxSaleSeries bounds the sales the sink counts by name.
const maxSaleSeries = 256

// saleCounts counts the orders handled per sale, at most maxSaleSeries of them by name.
type saleCounts struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *saleCounts) add(sku string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	if _, ok := c.n[sku]; !ok && len(c.n) >= maxSaleSeries {
		sku = "other"
	}
	c.n[sku] += n
}

func (c *saleCounts) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// Sales are the sales this sink has handled orders of, with their counts (the rest past 256
// sales as "other").
func (s *Sink) Sales() map[string]int64 { return s.sales.snapshot() }

// Metrics is the sink's registry, with a collector on s.
func (s *Sink) Metrics() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), tlsfiles.Collector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		s.batchLatency, sinkCollector{s})
	return reg
}

type sinkCollector struct{ s *Sink }

func (sinkCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ordersDesc, batchesDesc, retriesDesc, deadLettersDesc, claimedDesc, lagDesc, topicDesc, saleOrdersDesc} {
		ch <- d
	}
}

func (c sinkCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for _, o := range []struct {
		outcome string
		n       int64
	}{{"confirmed", st.Confirmed}, {"rejected", st.Rejected}, {"cancelled", st.Cancelled}, {"redelivered", st.Redelivered}} {
		ch <- prometheus.MustNewConstMetric(ordersDesc, prometheus.CounterValue, float64(o.n), o.outcome)
	}
	ch <- prometheus.MustNewConstMetric(batchesDesc, prometheus.CounterValue, float64(st.Batches))
	ch <- prometheus.MustNewConstMetric(retriesDesc, prometheus.CounterValue, float64(st.Retries))
	ch <- prometheus.MustNewConstMetric(deadLettersDesc, prometheus.CounterValue, float64(st.DeadLetters))
	ch <- prometheus.MustNewConstMetric(claimedDesc, prometheus.GaugeValue, float64(c.s.claimed.Load()))
	consuming := 0.0
	if c.s.Waiting() == "" {
		consuming = 1
	}
	k := c.s.cfg.Kafka
	ch <- prometheus.MustNewConstMetric(topicDesc, prometheus.GaugeValue, consuming, k.Topic, k.Group, strconv.Itoa(sale.MessageVersion))
	for sku, n := range c.s.Sales() {
		ch <- prometheus.MustNewConstMetric(saleOrdersDesc, prometheus.CounterValue, float64(n), sku)
	}
	c.s.lagMu.Lock()
	defer c.s.lagMu.Unlock()
	for p, lag := range c.s.lag {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(lag), p.topic, strconv.Itoa(int(p.partition)))
	}
}

// maxScrapes bounds the scrapes served at once; past it, 503 (and each peer has at most
// adminhttp.MaxPeerInFlight).
const maxScrapes = 8

// AdminHandler serves /metrics, /livez (the process serves HTTP) and /readyz (the sink is not
// waiting for a service at start, is in a consumer group session, and MySQL answers a ping
// within a second; its body names the topic and group).
func (s *Sink) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	reg := s.Metrics()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, MaxRequestsInFlight: maxScrapes}))
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if w8 := s.Waiting(); w8 != "" {
			http.Error(w, "waiting for "+w8, http.StatusServiceUnavailable)
			return
		}
		n, ok := s.Claimed()
		if !ok {
			http.Error(w, "kafka: not in a consumer group session (joining or rebalancing)", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := s.db.PingContext(ctx); err != nil {
			http.Error(w, "mysql: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintf(w, "ok: %d partitions of topic %s, group %s\n", n, s.cfg.Kafka.Topic, s.cfg.Kafka.Group)
	})
	return mux
}
