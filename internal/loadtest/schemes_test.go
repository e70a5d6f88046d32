package loadtest

import (
	"context"
	"encoding/xml"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill-proxy/internal/testenv"
)

func schemesOptions() SchemesOptions {
	return SchemesOptions{Schemes: Schemes, ProxyNoWait: "127.0.0.1:1", SKU: "t", Units: 50, Load: Load{Buyers: 3000, Conns: 20, Pipeline: 1, Qty: 1},
		Buckets: 3, Tries: 3, Rounds: 1, Drain: time.Minute}
}

func TestSchemesOptionsRefuseBadInput(t *testing.T) {
	if err := schemesOptions().Validate(); err != nil {
		t.Fatalf("good options refused: %v", err)
	}
	for name, bad := range map[string]func(*SchemesOptions){
		"unknown scheme":                func(o *SchemesOptions) { o.Schemes = []string{"proxy", "redlock"} },
		"no scheme":                     func(o *SchemesOptions) { o.Schemes = nil },
		"no units":                      func(o *SchemesOptions) { o.Units = 0 },
		"one bucket":                    func(o *SchemesOptions) { o.Buckets = 1 },
		"17 buckets":                    func(o *SchemesOptions) { o.Buckets = 17 },
		"no tries":                      func(o *SchemesOptions) { o.Tries = 0 },
		"no rounds":                     func(o *SchemesOptions) { o.Rounds = 0 },
		"no buyers":                     func(o *SchemesOptions) { o.Load.Buyers = 0 },
		"failover of MySQL":             func(o *SchemesOptions) { o.Failover = true },
		"failover of local":             func(o *SchemesOptions) { o.Failover, o.Schemes = true, []string{SchemeProxy, SchemeLocal} },
		"no-WAIT proxy with no address": func(o *SchemesOptions) { o.ProxyNoWait = "" },
	} {
		o := schemesOptions()
		bad(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestLocalStockOversells: two instances that each hold the whole stock sell it twice, and
// the scheme counts it.
func TestLocalStockOversells(t *testing.T) {
	o := schemesOptions()
	o.Schemes = []string{SchemeLocal}
	rs, err := RunSchemes(context.Background(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if r.Orders != 2*int64(o.Units) || r.OrderUnits != r.Orders || r.Oversell != int64(o.Units) || r.Unsold != 0 {
		t.Fatalf("local stock over 2 instances: %d orders, %d units kept, oversell %d, unsold %d; want %d, %d, %d, 0",
			r.Orders, r.OrderUnits, r.Oversell, r.Unsold, 2*o.Units, 2*o.Units, o.Units)
	}
	if r.Requests != int64(o.Load.Buyers) || r.Replies[ReplySoldOut] != int64(o.Load.Buyers)-r.Orders {
		t.Fatalf("replies %v of %d requests", r.Replies, r.Requests)
	}
	if r.OrdersPerSec <= 0 || r.SellMs <= 0 {
		t.Fatalf("orders/s %v over %v ms", r.OrdersPerSec, r.SellMs)
	}
}

func TestMachineCPUGrows(t *testing.T) {
	a, err := machineCPU()
	if err != nil {
		t.Skipf("no /proc/stat here: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := machineCPU(); b > a {
			return
		}
	}
	t.Fatal("the machine's busy CPU did not grow while this test spun for 5 s")
}

func sampleSchemes() []SchemeResult {
	return []SchemeResult{
		{Scheme: SchemeMySQLLock, Holds: schemeHolds[SchemeMySQLLock], Orders: 2000, OrderUnits: 2000, OrdersPerSec: 900, CPUPerOrderMs: 4.2, P99us: 250000, Replies: map[string]int64{ReplyOrder: 2000, ReplyBusy: 70000}},
		{Scheme: SchemeProxy, Holds: schemeHolds[SchemeProxy], Orders: 2000, OrderUnits: 2000, OrdersPerSec: 20000, CPUPerOrderMs: 0.8, P99us: 9000, Replies: map[string]int64{ReplyOrder: 2000, ReplySoldOut: 78000}},
		{Scheme: SchemeLocal, Holds: schemeHolds[SchemeLocal], Orders: 4000, OrderUnits: 4000, Oversell: 2000, OrdersPerSec: 400000, P99us: 100, Replies: map[string]int64{ReplyOrder: 4000, ReplySoldOut: 76000}},
	}
}

func TestSchemesTable(t *testing.T) {
	table := SchemesTable(sampleSchemes())
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 5 {
		t.Fatalf("want a header, a rule and 3 rows:\n%s", table)
	}
	for _, want := range []string{"| mysql-lock |", "| 900 |", "| 4.20 ms |", "BUSY 70000", "| 2000 | 0 |", "| local |", "| 4000 | 2000 |", "| - |"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

func TestSchemesFailoverTable(t *testing.T) {
	rs := []SchemeResult{{Scheme: SchemeOneRedis, Round: 2, Failover: "127.0.0.1:7001 to 127.0.0.1:7004 after 500 orders, promoted in 40 ms", Orders: 2030, OrderUnits: 1990,
		Oversell: 30, NotKept: 40, ErrorWindowMs: 300, Replies: map[string]int64{ReplyOrder: 2030, ReplyUnavailable: 12}}}
	table := SchemesFailoverTable(rs)
	for _, want := range []string{"| one-redis | 2 | 127.0.0.1:7001 to 127.0.0.1:7004 after 500 orders, promoted in 40 ms | 2030 | 1990 | 30 | 40 | 12 | UNAVAILABLE 12 | 300 ms |"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

// TestSchemesChart: the SVG is well formed, every scheme has a bar in every panel, bars are
// ordered as the values are, and only an oversell is red.
func TestSchemesChart(t *testing.T) {
	var b strings.Builder
	fo := []SchemeResult{{Scheme: SchemeProxy, Round: 1}, {Scheme: SchemeProxy, Round: 2, NotKept: 3}}
	if err := WriteSchemesChart(&b, "schemes <&>", sampleSchemes(), fo); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
	bars := regexp.MustCompile(`<rect x="130" y="\d+" width="([\d.]+)" height="18" fill="(#[0-9a-f]+)"/>`).FindAllStringSubmatch(svg, -1)
	if len(bars) != 3*(len(schemePanels)+1) {
		t.Fatalf("%d bars, want %d", len(bars), 3*(len(schemePanels)+1))
	}
	width := func(i int) float64 { w, _ := strconv.ParseFloat(bars[i][1], 64); return w }
	if !(width(0) < width(1) && width(1) < width(2)) {
		t.Errorf("orders/s bars not in the values' order: %v %v %v", width(0), width(1), width(2))
	}
	if !(width(3) > width(4) && width(5) == 0) {
		t.Errorf("CPU bars: %v %v %v (a scheme without a figure gets none)", width(3), width(4), width(5))
	}
	oversell := 3 * (len(schemePanels) - 1)
	for i, bar := range bars {
		red := bar[2] == "#c62828"
		if red != (i == oversell+2 || i == oversell+4) {
			t.Errorf("bar %d is %s", i, bar[2])
		}
	}
	// The failover panel: the proxy's worst round, no bar for the schemes not failed over.
	if !strings.Contains(svg, "worst of 2 rounds") || strings.Count(svg, "no Redis master to fail over") != 2 || width(oversell+4) == 0 || width(oversell+3) != 0 {
		t.Errorf("the failover panel is wrong:\n%s", svg)
	}
	if err := WriteSchemesChart(io.Discard, "", nil, nil); err == nil {
		t.Error("a chart of no schemes was drawn")
	}
}

// TestSchemesOnServices sells a small sale under the schemes that need no proxy: the
// optimistic lock and the one Redis keep the stock, local stock oversells.
func TestSchemesOnServices(t *testing.T) {
	testenv.MySQL(t).Close()
	testenv.Kafka(t)
	o := schemesOptions()
	o.Schemes = []string{SchemeMySQLLock, SchemeOneRedis, SchemeLocal}
	o.OneRedis = testenv.Standalone(t)
	o.Services = testenv.Config(t)
	o.SKU = "schemes_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	o.Services.Kafka.Topic = "test." + o.SKU
	t.Cleanup(func() { testenv.DeleteTopics(t, o.Services.Kafka.Brokers, o.Services.Kafka.Topic+".seeds") })
	rs, err := RunSchemes(context.Background(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		wantOversell := int64(0)
		if r.Scheme == SchemeLocal {
			wantOversell = int64(o.Units)
		}
		if r.Oversell != wantOversell || r.OrderUnits != r.Orders || r.Requests != int64(o.Load.Buyers) {
			t.Errorf("%s: %d orders told, %d units kept, oversell %d (want %d), %d requests; replies %v, first error %q",
				r.Scheme, r.Orders, r.OrderUnits, r.Oversell, wantOversell, r.Requests, r.Replies, r.FirstError)
		}
		if r.Scheme != SchemeLocal && r.CPUPerOrderMs <= 0 {
			t.Errorf("%s: no CPU per order", r.Scheme)
		}
	}
}
