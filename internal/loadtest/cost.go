package loadtest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

// Table (n) of BENCHMARKS.md: what one request costs each server, from scripts/bench-cost.sh's
// cost.tsv and profiles, and the seeds' sale's CPU from bench.sh's seedscpu.tsv.

// costRow is one row of cost.tsv: each round's CPU per request (µs), requests per second and,
// when the run recorded it, p99 latency (ms, as redis-benchmark gives it).
type costRow struct{ cpus, rpss, p99s []float64 }

// costRows are cost.tsv's rows by (row, pipeline depth), in the file's order.
type costRows struct {
	order [][2]string
	rows  map[[2]string]costRow
}

func readCost(path string) (costRows, error) {
	f, err := os.Open(path)
	if err != nil {
		return costRows{}, err
	}
	defer f.Close()
	t := costRows{rows: map[[2]string]costRow{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if (len(fields) != 4 && len(fields) != 5) || fields[0] == "row" {
			continue
		}
		var r costRow
		if r.cpus, err = floats(fields[2]); err == nil {
			r.rpss, err = floats(fields[3])
		}
		if err == nil && len(fields) == 5 {
			r.p99s, err = floats(fields[4])
		}
		if err != nil || len(r.cpus) == 0 {
			return costRows{}, fmt.Errorf("%s: row %s -P %s: %v", path, fields[0], fields[1], err)
		}
		key := [2]string{fields[0], fields[1]}
		t.order = append(t.order, key)
		t.rows[key] = r
	}
	if len(t.order) == 0 {
		return costRows{}, fmt.Errorf("%s: no rows", path)
	}
	return t, sc.Err()
}

func floats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Fields(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// us is the median CPU per request of a row, 0 when the run lacks it.
func (t costRows) us(name, p string) float64 {
	r, ok := t.rows[[2]string{name, p}]
	if !ok {
		return 0
	}
	return median(r.cpus)
}

// p99 is the median p99 latency of a row in ms, 0 when the run lacks it.
func (t costRows) p99(name, p string) float64 {
	r, ok := t.rows[[2]string{name, p}]
	if !ok || len(r.p99s) == 0 {
		return 0
	}
	return median(r.p99s)
}

// costNames are the rows' descriptions, by cost.tsv's row name.
var costNames = map[string]string{
	"redis-get":          "redis-server answering `GET` from memory",
	"twemproxy-get":      "twemproxy (nutcracker) forwarding `GET` to that redis-server",
	"standalone-get":     "seckill-proxy forwarding `GET` to that redis-server",
	"cluster-onekey-get": "seckill-proxy forwarding `GET` to the cluster, keys of one master",
	"cluster-get":        "seckill-proxy forwarding `GET` to the cluster, keys of all three masters",
	"cluster-get-2loops": "the same with `redis.event_loops: 2`",
	"soldout-buy":        "seckill-proxy answering a sold-out `SECKILL.BUY` from memory",
	"buy":                "seckill-proxy, a successful `SECKILL.BUY` (Lua on the master, `WAIT 1` for a replica, the order to Kafka)",
	"buy-nowait":         "the same with `buy.wait_replicas: 0` (told before a replica holds it)",
}

// costTable is table (n)'s first part: each row's median and spread.
func costTable(t costRows) string {
	var b strings.Builder
	b.WriteString("| request | -P | µs per request (median) | rounds (µs) | req/s (median) |\n|---|---|---|---|---|\n")
	for _, key := range t.order {
		r := t.rows[key]
		name := costNames[key[0]]
		if name == "" {
			name = key[0]
		}
		rounds := make([]string, len(r.cpus))
		for i, c := range r.cpus {
			rounds[i] = strconv.FormatFloat(c, 'f', 2, 64)
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %s | %.0f |\n", name, key[1], median(r.cpus), strings.Join(rounds, ", "), median(r.rpss))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// costGoal is one of the ratios with a goal: a numerator and denominator row at one depth, of
// CPU per request, or of p99 latency (latency).
type costGoal struct {
	name     string
	num, den [2]string
	max      float64
	latency  bool
}

var costGoals = []costGoal{
	{name: "successful BUY / cluster GET (all masters)", num: [2]string{"buy", "1"}, den: [2]string{"cluster-get", "1"}, max: 1.5},
	{name: "successful BUY / cluster GET (all masters)", num: [2]string{"buy", "16"}, den: [2]string{"cluster-get", "16"}, max: 0},
	{name: "successful BUY / cluster GET (one master)", num: [2]string{"buy", "1"}, den: [2]string{"cluster-onekey-get", "1"}, max: 0},
	{name: "successful BUY, WAIT for a replica / without", num: [2]string{"buy", "1"}, den: [2]string{"buy-nowait", "1"}, max: 1.1},
	{name: "successful BUY, WAIT for a replica / without", num: [2]string{"buy", "16"}, den: [2]string{"buy-nowait", "16"}, max: 1.1},
	{name: "p99 latency: successful BUY, WAIT for a replica / without", num: [2]string{"buy", "1"}, den: [2]string{"buy-nowait", "1"}, max: 1.5, latency: true},
	{name: "p99 latency: successful BUY, WAIT for a replica / without", num: [2]string{"buy", "16"}, den: [2]string{"buy-nowait", "16"}, max: 1.5, latency: true},
	{name: "cluster GET, one master / standalone GET", num: [2]string{"cluster-onekey-get", "1"}, den: [2]string{"standalone-get", "1"}, max: 1.2},
	{name: "cluster GET, one master / standalone GET", num: [2]string{"cluster-onekey-get", "16"}, den: [2]string{"standalone-get", "16"}, max: 1.2},
	{name: "cluster GET, all masters / standalone GET", num: [2]string{"cluster-get", "1"}, den: [2]string{"standalone-get", "1"}, max: 1.2},
	{name: "cluster GET, all masters / standalone GET", num: [2]string{"cluster-get", "16"}, den: [2]string{"standalone-get", "16"}, max: 1.2},
	{name: "sold-out BUY / redis-server GET", num: [2]string{"soldout-buy", "1"}, den: [2]string{"redis-get", "1"}, max: 1.2},
	{name: "sold-out BUY / redis-server GET", num: [2]string{"soldout-buy", "16"}, den: [2]string{"redis-get", "16"}, max: 0},
	{name: "2 loops / 1 loop, cluster GET", num: [2]string{"cluster-get-2loops", "1"}, den: [2]string{"cluster-get", "1"}, max: 1.0},
	{name: "2 loops / 1 loop, cluster GET", num: [2]string{"cluster-get-2loops", "16"}, den: [2]string{"cluster-get", "16"}, max: 1.0},
	{name: "pass-through GET / twemproxy's", num: [2]string{"standalone-get", "1"}, den: [2]string{"twemproxy-get", "1"}, max: 1.0},
	{name: "pass-through GET / twemproxy's", num: [2]string{"standalone-get", "16"}, den: [2]string{"twemproxy-get", "16"}, max: 1.0},
}

// costRatios is table (n)'s ratios against their goals, the seeds' sale's last.
func costRatios(t costRows, seeds seedsCPU) string {
	var b strings.Builder
	b.WriteString("| ratio of CPU per request (or of p99 latency) | -P | ratio | goal | met |\n|---|---|---|---|---|\n")
	row := func(name, p string, ratio, goal float64) {
		g, met := "-", "-"
		if goal > 0 {
			g, met = "≤ "+strconv.FormatFloat(goal, 'f', -1, 64), "no"
			if ratio <= goal {
				met = "yes"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %s | %s |\n", name, p, ratio, g, met)
	}
	for _, g := range costGoals {
		num, den := t.us(g.num[0], g.num[1]), t.us(g.den[0], g.den[1])
		if g.latency {
			num, den = t.p99(g.num[0], g.num[1]), t.p99(g.den[0], g.den[1])
		}
		if num == 0 || den == 0 {
			continue
		}
		row(g.name, g.num[1], num/den, g.max)
	}
	if seeds.seeds > 0 {
		row("the seeds' sale: the proxy / the seeds' design", "1", seeds.proxy/seeds.seeds, 0.67)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// seedsCPU is the medians of seedscpu.tsv: the proxy's and the seeds' service's CPU per
// request over the seeds' sale.
type seedsCPU struct{ proxy, seeds float64 }

func readSeedsCPU(path string) (seedsCPU, error) {
	f, err := os.Open(path)
	if err != nil {
		return seedsCPU{}, err
	}
	defer f.Close()
	var proxy, seeds []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 || fields[0] == "proxy_us" {
			continue
		}
		p, err1 := strconv.ParseFloat(fields[0], 64)
		s, err2 := strconv.ParseFloat(fields[1], 64)
		if err1 != nil || err2 != nil {
			return seedsCPU{}, fmt.Errorf("%s: bad line %q", path, sc.Text())
		}
		proxy, seeds = append(proxy, p), append(seeds, s)
	}
	if len(proxy) == 0 {
		return seedsCPU{}, fmt.Errorf("%s: no rounds", path)
	}
	return seedsCPU{proxy: median(proxy), seeds: median(seeds)}, sc.Err()
}

// profileKinds are where a CPU sample's time went, tried in this order on its stack: the first
// kind with a frame on the stack takes the sample (a system call made by Sarama is Sarama's).
var profileKinds = []struct {
	name     string
	prefixes []string
}{
	{"Kafka producer (Sarama, go-metrics)", []string{"github.com/IBM/sarama.", "github.com/rcrowley/go-metrics.", "github.com/eapache/"}},
	{"go-redis", []string{"github.com/redis/go-redis/"}},
	{"metrics (Prometheus)", []string{"github.com/prometheus/"}},
	{"system calls (sockets, epoll)", []string{"internal/runtime/syscall", "syscall.", "golang.org/x/sys/unix."}},
	{"allocation and GC", []string{"runtime.mallocgc", "runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.gcAssist", "runtime.(*mheap)", "runtime.growslice", "runtime.newobject", "runtime.makeslice"}},
	{"goroutine hand-offs (scheduler, channels, timers)", []string{"runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.chansend", "runtime.chanrecv", "runtime.selectgo", "runtime.goready", "runtime.futex", "runtime.notewakeup", "runtime.wakep", "runtime.mcall", "runtime.gopark", "runtime.runqgrab", "runtime.stealWork", "time."}},
	{"the proxy's own code", []string{"seckill-proxy/"}},
}

// profileShares is each kind's share of a CPU profile's samples, in profileKinds' order, and
// the rest ("other": the runtime's own bookkeeping, the standard library).
func profileShares(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	vi := len(p.SampleType) - 1 // cpu nanoseconds
	shares := make([]float64, len(profileKinds)+1)
	var total float64
	for _, s := range p.Sample {
		v := float64(s.Value[vi])
		total += v
		shares[sampleKind(s)] += v
	}
	if total == 0 {
		return nil, fmt.Errorf("%s: no samples", path)
	}
	for i := range shares {
		shares[i] /= total
	}
	return shares, nil
}

func sampleKind(s *profile.Sample) int {
	for k, kind := range profileKinds {
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				for _, pre := range kind.prefixes {
					if strings.HasPrefix(line.Function.Name, pre) {
						return k
					}
				}
			}
		}
	}
	return len(profileKinds)
}

// profileTable is table (n)'s profiles: for each seckill-proxy row that has one, the share of
// its CPU per kind.
func profileTable(work string, t costRows) (string, error) {
	var b strings.Builder
	b.WriteString("| request | -P |")
	for _, k := range profileKinds {
		b.WriteString(" " + k.name + " |")
	}
	b.WriteString(" other |\n|---|---|" + strings.Repeat("---|", len(profileKinds)+1) + "\n")
	n := 0
	for _, key := range t.order {
		path := filepath.Join(work, "cost."+key[0]+"."+key[1]+".pprof")
		if _, err := os.Stat(path); err != nil {
			continue
		}
		shares, err := profileShares(path)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "| %s | %s |", key[0], key[1])
		for _, s := range shares {
			fmt.Fprintf(&b, " %.0f%% |", 100*s)
		}
		b.WriteString("\n")
		n++
	}
	if n == 0 {
		return "(no profiles in this run: BENCH_PROFILE=0)", nil
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
