package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/xid"

	"seckill-proxy/internal/loadtest"
	"seckill-proxy/internal/testenv"
)

// promQuery runs an instant query on the dev stack's Prometheus and returns each series'
// value by the given label's value.
func promQuery(t *testing.T, query, label string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(testenv.PrometheusURL + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("query %s: %v %s", query, err, body.Error)
	}
	out := map[string]float64{}
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("query %s: value %v", query, r.Value)
		}
		out[r.Metric[label]] = v
	}
	return out
}

// TestPrometheusScrapesASale: the dev stack's Prometheus scrapes the proxy and the sink
// during a sale driven by the load tool's engine; once the sale is over, its buys by outcome,
// as Prometheus has them, equal the load tool's counts, and the sink's confirmed orders equal
// the units sold.
func TestPrometheusScrapesASale(t *testing.T) {
	targets := testenv.Prometheus(t)
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	snk := runSink(t, cfg)
	proxyAdmin, sinkAdmin := httptest.NewServer(s.admin), httptest.NewServer(snk.AdminHandler())
	t.Cleanup(proxyAdmin.Close)
	t.Cleanup(sinkAdmin.Close)
	run := xid.New().String()
	for kind, srv := range map[string]*httptest.Server{"proxy": proxyAdmin, "sink": sinkAdmin} {
		path := filepath.Join(targets, kind+"-test-"+run+".json")
		target := fmt.Sprintf(`[{"targets": [%q], "labels": {"run": %q}}]`, strings.TrimPrefix(srv.URL, "http://"), run)
		if err := os.WriteFile(path+".tmp", []byte(target), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil { // whole, as file discovery reads it
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(path) })
	}
	eventually(t, 30*time.Second, "Prometheus to scrape both binaries", func() bool {
		up := promQuery(t, fmt.Sprintf(`up{run=%q}`, run), "job")
		return up["seckill-proxy"] == 1 && up["seckill-sink"] == 1
	})
	var ready string
	eventually(t, 30*time.Second, "the sink to be ready: in a group session that holds every partition", func() bool {
		resp, err := http.Get(sinkAdmin.URL + "/readyz")
		if err != nil {
			return false
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return false
		}
		ready = string(body)
		return resp.StatusCode == http.StatusOK && ready == fmt.Sprintf("ok: %d partitions of topic %s, group %s\n", cfg.Kafka.Partitions, cfg.Kafka.Topic, cfg.Kafka.Group)
	})
	eventually(t, 30*time.Second, "Prometheus to have the sink's partitions", func() bool {
		got := promQuery(t, fmt.Sprintf(`seckill_sink_partitions_claimed{run=%q}`, run), "job")
		return got["seckill-sink"] == float64(cfg.Kafka.Partitions)
	})
	t.Logf("the sink's /readyz: %q", ready)

	ctx := context.Background()
	c := s.client(t, 20)
	sku := newSKU("prom")
	const units = 1500
	s.sale(t, c, sku, units)
	buy, pipe := loadtest.ProxyBuyer(c, sku, 1)
	res := loadtest.Run(ctx, loadtest.Load{Buyers: 3000, Conns: 20, Pipeline: 1, Qty: 1, RepeatShare: 0.1}, buy, pipe, nil, nil)
	want := map[string]float64{}
	for kind, n := range res.Replies {
		want[strings.ToLower(kind)] = float64(n)
	}
	if want["order"] != units || want["soldout"] == 0 || want["duplicate"] == 0 {
		t.Fatalf("the load tool's replies: %v", res.Replies)
	}
	s.waitConfirmed(t, sku, units, 30*time.Second)

	var got, confirmed map[string]float64
	eventually(t, 30*time.Second, "Prometheus's buys by outcome to equal the load tool's", func() bool {
		got = promQuery(t, fmt.Sprintf(`seckill_proxy_sale_buys_total{run=%q, sku=%q} > 0`, run, sku), "outcome")
		confirmed = promQuery(t, fmt.Sprintf(`seckill_sink_orders_total{run=%q}`, run), "outcome")
		if len(got) != len(want) || confirmed["confirmed"] != units {
			return false
		}
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	})
	t.Logf("the load tool: %v; Prometheus: %v; the sink's confirmed orders: %v", want, got, confirmed["confirmed"])
}
