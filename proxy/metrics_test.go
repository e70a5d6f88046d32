package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"seckill-proxy/internal/testenv"
)

// scrape gets h's /metrics and parses it.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// value is the sample of name whose labels include want, or -1.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// TestMetricsAndProbes: a small sale through the proxy and the sink; the proxy's /metrics
// counts the buys by outcome as the guard does, per sale too, with the sale's stock and
// outbox; the BUY histogram has one sample per buy; the sink's /metrics counts the orders it
// stored and its partitions' lag; the probes answer; and every metric the Grafana dashboard
// queries is one of these.
func TestMetricsAndProbes(t *testing.T) {
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	snk := runSink(t, cfg)
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("metrics")
	s.sale(t, c, sku, 3)
	for _, uid := range []string{"a", "b", "c", "d", "a"} {
		_ = c.Do(ctx, "seckill.buy", sku, uid).Err()
	}
	s.waitConfirmed(t, sku, 3, 30*time.Second)

	// Pass-through: 4 GETs and an INCR of a string, which Redis answers with an error.
	for i := range 4 {
		if err := c.Get(ctx, fmt.Sprintf("metrics:key:%d", i)).Err(); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, "metrics:str", "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Incr(ctx, "metrics:str").Err(); err == nil {
		t.Fatal("INCR of a string did not fail")
	}

	fams := scrape(t, s.admin)
	for cmd, want := range map[string][2]float64{"get": {4, 0}, "set": {1, 0}, "incr": {1, 1}} {
		calls := value(fams, "seckill_proxy_passthrough_commands_total", map[string]string{"command": cmd})
		errs := value(fams, "seckill_proxy_passthrough_errors_total", map[string]string{"command": cmd})
		if calls != want[0] || errs != want[1] {
			t.Errorf("%s: %v commands, %v errors; want %v and %v", cmd, calls, errs, want[0], want[1])
		}
	}
	if got := value(fams, "seckill_proxy_passthrough_duration_seconds", nil); got < 6 {
		t.Errorf("pass-through latency samples %v, want at least 6", got)
	}
	if got := value(fams, "seckill_proxy_upstream_unavailable_total", map[string]string{"reason": "timeout"}); got != 0 {
		t.Errorf("seckill_proxy_upstream_unavailable_total{reason=timeout} = %v, want 0", got)
	}
	// Every counter of INFO seckill is exported under the metric named beside it, or is
	// marked INFO-only.
	for _, f := range s.fields() {
		_, ok := f.Value.(int64)
		switch {
		case !ok:
		case f.Metric == nil && !f.InfoOnly:
			t.Errorf("INFO seckill's %s is not exported: give its guard.Field a Metric, or mark it InfoOnly", f.Name)
		case f.Metric != nil:
			var labels map[string]string
			if f.Metric.Outcome != "" {
				labels = map[string]string{"outcome": f.Metric.Outcome}
			}
			if got := value(fams, f.Metric.Name, labels); got < 0 {
				t.Errorf("%s (INFO %s) is not in /metrics", f.Metric.Name, f.Name)
			}
		}
	}
	st := s.g.Stats()
	for outcome, want := range map[string]int64{"order": st.Successes, "soldout": st.SoldOut, "duplicate": st.Duplicates} {
		if got := value(fams, "seckill_proxy_buys_total", map[string]string{"outcome": outcome}); got != float64(want) {
			t.Errorf("seckill_proxy_buys_total{outcome=%q} = %v, want %d", outcome, got, want)
		}
	}
	for outcome, want := range map[string]float64{"order": 3, "soldout": 1, "duplicate": 1} {
		if got := value(fams, "seckill_proxy_sale_buys_total", map[string]string{"sku": sku, "outcome": outcome}); got != want {
			t.Errorf("seckill_proxy_sale_buys_total{sku, outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if got := value(fams, "seckill_proxy_sale_stock", map[string]string{"sku": sku}); got != 0 {
		t.Errorf("seckill_proxy_sale_stock = %v, want 0", got)
	}
	if got := value(fams, "seckill_proxy_sale_outbox_entries", map[string]string{"sku": sku}); got < 0 {
		t.Errorf("no seckill_proxy_sale_outbox_entries for the sale")
	}
	if got, want := value(fams, "seckill_proxy_buy_duration_seconds", nil), float64(st.Buys); got != want {
		t.Errorf("BUY latency samples %v, want one per buy (%v)", got, want)
	}

	sinkFams := scrape(t, snk.AdminHandler())
	if got := value(sinkFams, "seckill_sink_orders_total", map[string]string{"outcome": "confirmed"}); got < 3 {
		t.Errorf("seckill_sink_orders_total{outcome=confirmed} = %v, want at least 3", got)
	}
	if got := value(sinkFams, "seckill_sink_consumer_lag", nil); got < 0 {
		t.Errorf("no seckill_sink_consumer_lag series")
	}
	if got := value(sinkFams, "seckill_sink_batch_duration_seconds", nil); got < 1 {
		t.Errorf("seckill_sink_batch_duration_seconds has %v samples", got)
	}

	for _, h := range []http.Handler{s.admin, snk.AdminHandler()} {
		for _, path := range []string{"/livez", "/readyz"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if rec.Code != http.StatusOK {
				t.Errorf("%s: %d %s", path, rec.Code, rec.Body)
			}
		}
	}

	promtoolCheck(t, s.admin)
	promtoolCheck(t, snk.AdminHandler())

	// The dashboard's queries name only metrics that exist.
	raw, err := os.ReadFile("../deploy/grafana/seckill.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	names := regexp.MustCompile(`\b(seckill_[a-z_]+|process_[a-z_]+|go_[a-z_]+)`)
	queried := 0
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			for _, n := range names.FindAllString(q.Expr, -1) {
				queried++
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
				if fams[base] == nil && sinkFams[base] == nil {
					t.Errorf("panel %q queries %s, which neither binary exports", p.Title, n)
				}
			}
		}
	}
	if queried < 10 {
		t.Errorf("the dashboard queries only %d metrics", queried)
	}
}

// promtoolCheck runs `promtool check metrics` (Debian's prometheus package, which the dev
// stack installs) on h's /metrics: Prometheus's own lint of names, types, help and units.
func promtoolCheck(t *testing.T, h http.Handler) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if testenv.Required() {
			t.Fatal("promtool not found: scripts/devstack.sh up installs it (Debian's prometheus package)")
		}
		t.Skip("promtool not found")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = rec.Body
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
