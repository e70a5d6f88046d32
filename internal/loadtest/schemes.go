package loadtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"seckill-proxy/conf"
)

// The seeds' comparison of stock schemes, measured: one sale (Units, Buyers) sold under each
// scheme in turn by the same load, with what each costs the whole machine per order, how fast
// it sells, its p99 and its oversell. seckill-bench schemes runs it; BENCHMARKS.md (s) shows it.

// The schemes, in the order they are run and shown.
const (
	SchemeMySQLLock = "mysql-lock"    // the seeds' optimistic-lock UPDATE straight on MySQL
	SchemeOneRedis  = "one-redis"     // the seeds' Lua script on one Redis, a Kafka send per order
	SchemeSeeds     = "seeds"         // one-redis, and the seeds' consumer storing each order in MySQL
	SchemeProxy     = "proxy"         // seckill-proxy on the cluster, the sink storing the orders
	SchemeNoWait    = "proxy-nowait"  // the same through a proxy with buy.wait_replicas 0 (ProxyNoWait)
	SchemeBuckets   = "proxy-buckets" // the same, the stock split over buckets
	SchemeLocal     = "local"         // stock counted in each instance's memory, two instances
)

// Schemes are every scheme, in order.
var Schemes = []string{SchemeMySQLLock, SchemeOneRedis, SchemeSeeds, SchemeProxy, SchemeNoWait, SchemeBuckets, SchemeLocal}

// DefaultSchemes are the schemes run when none are named: all but SchemeNoWait, which needs
// a proxy of its own.
var DefaultSchemes = slices.DeleteFunc(slices.Clone(Schemes), func(s string) bool { return s == SchemeNoWait || s == SchemeSeeds })

// schemeHolds says what a scheme's order is when the buyer is told: what its CPU pays for.
var schemeHolds = map[string]string{
	SchemeMySQLLock: "a MySQL row, in the buy's own transaction",
	SchemeOneRedis:  "a Redis decrement, then a Kafka message sent synchronously",
	SchemeSeeds:     "the same, then a MySQL row by the seeds' consumer",
	SchemeProxy:     "a Redis decrement and outbox entry, then a MySQL row by the sink",
	SchemeNoWait:    "the same, told before a replica holds it (no WAIT)",
	SchemeBuckets:   "the same, the stock over buckets",
	SchemeLocal:     "a counter in one instance's memory, nothing stored",
}

// SchemesOptions are seckill-bench schemes' flags.
type SchemesOptions struct {
	Schemes []string
	Proxy   string // the proxy's RESP address, for the proxy schemes
	// ProxyNoWait is the RESP address of a proxy run with buy.wait_replicas 0, for SchemeNoWait.
	ProxyNoWait string
	OneRedis    string // the one Redis of SchemeOneRedis (the dev stack's standalone server)
	SKU         string // the prefix of every scheme's SKU
	Units       int
	Load        Load
	Buckets     int // the buckets of SchemeBuckets
	Tries       int // how often a buyer tries the optimistic lock before giving up (BUSY)
	Rounds      int // rounds of every scheme; each scheme's row is its round of median orders/s
	Drain       time.Duration
	// Failover forces a failover of the master holding each scheme's stock once a quarter of
	// the units are told sold (schemes with a Redis master only; one-redis then runs on the
	// cluster, a master with its replica).
	Failover bool
	Services conf.Config
}

// Validate checks o.
func (o SchemesOptions) Validate() error {
	if err := o.Load.Validate(); err != nil {
		return err
	}
	for _, s := range o.Schemes {
		if !slices.Contains(Schemes, s) {
			return fmt.Errorf("unknown scheme %q (schemes: %s)", s, strings.Join(Schemes, ", "))
		}
		if s == SchemeNoWait && o.ProxyNoWait == "" {
			return errors.New("scheme proxy-nowait needs the address of a proxy without WAIT (-addr-nowait)")
		}
		if o.Failover && (s == SchemeMySQLLock || s == SchemeLocal || s == SchemeNoWait || s == SchemeSeeds) {
			return fmt.Errorf("scheme %s has no Redis master to fail over", s)
		}
	}
	switch {
	case len(o.Schemes) == 0:
		return errors.New("no scheme to run")
	case o.Units < 1:
		return fmt.Errorf("units must be at least 1, got %d", o.Units)
	case o.Buckets < 2 || o.Buckets > 16:
		return fmt.Errorf("buckets must be from 2 to 16, got %d", o.Buckets)
	case o.Tries < 1:
		return fmt.Errorf("tries must be at least 1, got %d", o.Tries)
	case o.Rounds < 1:
		return fmt.Errorf("rounds must be at least 1, got %d", o.Rounds)
	}
	return nil
}

// SchemeResult is one scheme's sale.
type SchemeResult struct {
	Scheme   string `json:"scheme"`
	Round    int    `json:"round"`
	Holds    string `json:"holds"`
	Requests int64  `json:"requests"`
	// Orders are the buyers told they bought; OrderUnits their units as the scheme's own
	// store counts them (MySQL, Redis or memory); Oversell the units beyond the stock.
	Orders     int64 `json:"orders"`
	OrderUnits int64 `json:"order_units"`
	Oversell   int64 `json:"oversell"`
	Unsold     int64 `json:"unsold"`
	// SellMs is the time from the first request to the last order told; OrdersPerSec the
	// orders over it.
	SellMs       float64 `json:"sell_ms"`
	OrdersPerSec float64 `json:"orders_per_s"`
	RequestsPerS float64 `json:"requests_per_s"`
	P50us        int64   `json:"p50_us"`
	P99us        int64   `json:"p99_us"`
	// CPUPerOrderMs is the whole machine's busy CPU (every process: the services, the proxy,
	// the sink, the load) from the first request until the orders are where the scheme keeps
	// them, over the orders; StoredMs that wait after the last request (the proxy's drain).
	CPUPerOrderMs float64          `json:"cpu_per_order_ms"`
	StoredMs      float64          `json:"stored_ms"`
	Replies       map[string]int64 `json:"replies"`
	FirstError    string           `json:"first_error,omitempty"`
	// Under a failover: what it was, the units told and not kept, and the span of the
	// timeline's samples with an error reply.
	Failover      string  `json:"failover,omitempty"`
	NotKept       int64   `json:"not_kept"`
	ErrorWindowMs float64 `json:"error_window_ms"`
	// Processes and Commands say where an order's CPU went: each process's CPU per order, by
	// role, and each Redis node's commands per order (account.go).
	Processes []ProcessCost `json:"processes,omitempty"`
	Commands  []CommandCost `json:"commands,omitempty"`
}

// scheme is one scheme set up for a round: its buyer, then what it counts once the load ends.
type scheme struct {
	buy Buyer
	// settle waits until the orders are kept and returns their units as kept.
	settle func(ctx context.Context, res Result) (kept, error)
	close  func()
	// stockKey is the cluster key of the stock, whose master a failover hits.
	stockKey string
}

// kept is what a scheme's store holds once the load is over: the units of its orders, and
// the units told to buyers that it does not hold.
type kept struct{ units, notKept int64 }

// keptOf is kept for a store that holds units, where any unit told beyond them is not kept.
func keptOf(units int64, res Result, qty int) kept {
	return kept{units: units, notKept: max(0, int64(len(res.Orders)*qty)-units)}
}

// RunSchemes sells o's sale under every scheme of o.Schemes, o.Rounds times each (the schemes
// alternate within a round), and returns each scheme's round of median orders per second; with
// o.Failover, every round of every scheme, since each failover is a draw of its own.
func RunSchemes(ctx context.Context, o SchemesOptions, progress io.Writer) ([]SchemeResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rounds := map[string][]SchemeResult{}
	pace := &failoverPace{redis: o.Services.Redis}
	for round := 1; round <= o.Rounds; round++ {
		for _, name := range o.Schemes {
			fmt.Fprintf(progress, "scheme %s, round %d of %d\n", name, round, o.Rounds)
			r, err := runScheme(ctx, o, name, fmt.Sprintf("%s_%s_%d", o.SKU, strings.ReplaceAll(name, "-", "_"), round), pace)
			if err != nil {
				return nil, fmt.Errorf("scheme %s: %w", name, err)
			}
			r.Round = round
			rounds[name] = append(rounds[name], r)
		}
	}
	out := make([]SchemeResult, 0, len(o.Schemes)*o.Rounds)
	for _, name := range o.Schemes {
		rs := rounds[name]
		if o.Failover {
			out = append(out, rs...)
			continue
		}
		slices.SortFunc(rs, func(a, b SchemeResult) int { return cmp.Compare(a.OrdersPerSec, b.OrdersPerSec) })
		out = append(out, rs[len(rs)/2])
	}
	return out, nil
}

// runScheme sells one sale of sku under scheme name; with o.Failover, once pace says the
// cluster is ready for another.
func runScheme(ctx context.Context, o SchemesOptions, name, sku string, pace *failoverPace) (SchemeResult, error) {
	if o.Failover {
		if err := pace.ready(ctx); err != nil {
			return SchemeResult{}, err
		}
	}
	s, err := openScheme(ctx, o, name, sku)
	if err != nil {
		return SchemeResult{}, err
	}
	defer s.close()
	var fo *failover
	if o.Failover {
		fo = newFailover(o.Services.Redis, s.stockKey, int64(o.Units/4))
	}
	nodes := append(slices.Clone(o.Services.Redis.Addrs), o.OneRedis)
	procs0, cmds0 := sampleProcesses(), sampleCommands(ctx, nodes)
	cpu0, cpuErr := machineCPU()
	start := time.Now()
	var lastOrder atomic.Int64 // when the last order was told, in ns from start
	onOrder := func(uid string, at time.Time) {
		raiseTo(&lastOrder, int64(at.Sub(start)))
		if fo != nil {
			fo.onOrder(uid, at)
		}
	}
	res := Run(ctx, o.Load, s.buy, nil, nil, onOrder)
	k, err := s.settle(ctx, res)
	if err != nil {
		return SchemeResult{}, err
	}
	units := k.units
	cpu1, err := machineCPU()
	procs1, cmds1 := sampleProcesses(), sampleCommands(ctx, nodes)
	told := int64(len(res.Orders) * o.Load.Qty)
	r := SchemeResult{Scheme: name, Holds: schemeHolds[name], Requests: res.Requests, Orders: int64(len(res.Orders)),
		OrderUnits: units, Oversell: max(0, max(units, told)-int64(o.Units)), Unsold: max(0, int64(o.Units)-units),
		NotKept: k.notKept, RequestsPerS: res.Throughput(),
		P50us: res.Latency.ValueAtQuantile(50), P99us: res.Latency.ValueAtQuantile(99),
		StoredMs: float64(time.Since(res.LastBuy).Microseconds()) / 1000, Replies: res.Replies, FirstError: res.FirstError}
	r.ErrorWindowMs = NewReport(name, sku, o.Units, o.Load, res).ErrorWindowMs
	r.SellMs = float64(lastOrder.Load()) / 1e6
	if r.SellMs > 0 {
		r.OrdersPerSec = float64(r.Orders) / (r.SellMs / 1000)
	}
	if cpuErr == nil && err == nil && r.Orders > 0 {
		r.CPUPerOrderMs = float64((cpu1 - cpu0).Microseconds()) / 1000 / float64(r.Orders)
	}
	r.Processes, r.Commands = processCosts(procs0, procs1, r.Orders), commandCosts(cmds0, cmds1, r.Orders)
	if fo != nil {
		r.Failover = fo.wait()
		pace.last = time.Now()
	}
	return r, nil
}

// raiseTo raises v to n, if n is more.
func raiseTo(v *atomic.Int64, n int64) {
	for cur := v.Load(); n > cur; cur = v.Load() {
		if v.CompareAndSwap(cur, n) {
			return
		}
	}
}

// machineCPU is the machine's busy CPU time so far (every core, every process), from
// /proc/stat; USER_HZ is 100 on Linux.
func machineCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
