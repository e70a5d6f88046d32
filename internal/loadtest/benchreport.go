package loadtest

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// BENCHMARKS.md, written by `make bench` (scripts/bench.sh, through `seckill-bench
// bench-report`) from what the run left in its work directory: the load tool's -json reports,
// the tables the bench scripts print, and `go test -bench` output.

//go:embed benchreport.md.tmpl
var benchTemplate string

// BenchRun names a make bench run: its work directory and what it measured against.
type BenchRun struct {
	Work        string    // the directory the bench scripts wrote into
	Requests    int       // redis-benchmark's -n of the buy table
	Base        string    // the revision the CPU and pass-through tables compare against
	MetricsBase string    // the revision before the metrics, for table (k)
	Now         time.Time // when
	Commit      string    // what was measured (Revision)
	Cores       int
}

// benchData is what the template fills BENCHMARKS.md with.
type benchData struct {
	Now, Commit                string
	Cores, N                   int
	Base, MetricsBase          string
	Proxy, Seeds, SeedsIn      Report
	Checks, OldSeeds           string
	Buy, Pass, PassCompare     string
	Sink, Batch, Single        float64
	BigArgs, CPU, Legacy       string
	BuyPerGet, BuyPerGetBase   float64
	Admission, Metrics         string
	AdmissionRush, Hot         string
	AdmissionBusy              string // the same rush, a load process per proxy and a core kept busy
	Idle                       string // scripts/bench-idle.sh all: open sales nobody buys
	Skus                       string // scripts/bench-skus.sh: buys spread over many SKUs
	Schemes                    string // seckill-bench schemes: the seeds' stock schemes side by side
	SchemesFailover            string // the same with a master failover during each sale
	Truth, TruthBusy           string // one-redis, the seeds, the proxy with WAIT and without: quiet, and with a core busy
	Truth1k                    string // the same quiet, with 1,000 buyers at once
	TruthAccount, Truth1kAcct  string // where an order's CPU went in each (account.go)
	Buckets                    string
	Cost, CostRatios, Profiles string
	Outcome                    Report // the seeds' sale with every buyer waiting for the outcome
	StatusWait                 string // BenchmarkStatusWait's lines
	cpuNew, cpuBase, cpuTwo    cpuTable
	cpuMetrics, cpuMetricsBase cpuTable
}

// cpuRow is one row of scripts/bench-cpu.sh: CPU per request and requests per second.
type cpuRow struct{ us, rps float64 }

// cpuTable is bench-cpu.sh's table: its rows by (request, pipeline depth), and their order.
type cpuTable struct {
	order [][2]string
	rows  map[[2]string]cpuRow
}

// BenchReport makes BENCHMARKS.md from run's work directory.
func BenchReport(run BenchRun) (string, error) {
	d := benchData{Now: run.Now.UTC().Format("2006-01-02 15:04 UTC"), Commit: run.Commit, Cores: run.Cores, N: run.Requests,
		Base: run.Base, MetricsBase: run.MetricsBase}
	w := func(name string) string { return filepath.Join(run.Work, name) }
	var errs []error
	must := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	d.Proxy, err = medianRun(w("proxy"))
	must(err)
	d.Seeds, err = medianRun(w("seeds"))
	must(err)
	d.SeedsIn, err = medianRun(w("seedsin"))
	must(err)
	d.Checks = "all passed"
	if !d.Proxy.Passed {
		var failed []string
		for _, c := range d.Proxy.Checks {
			if !c.OK {
				failed = append(failed, c.Name)
			}
		}
		d.Checks = "FAILED: " + strings.Join(failed, ", ")
	}
	d.Sink, err = ordersPerSecond(w("sink.txt"), "BenchmarkSink")
	must(err)
	d.Batch, err = ordersPerSecond(w("persist.txt"), "BenchmarkPersist/batch=1000")
	must(err)
	d.Single, err = ordersPerSecond(w("persist.txt"), "BenchmarkPersist/batch=1-")
	must(err)
	d.Buy, err = tableBody(w("buy.md"))
	must(err)
	d.Pass, err = tableBody(w("pass.md"))
	must(err)
	d.Legacy, err = tableBody(w("legacy.md"))
	must(err)
	buckets, err := os.ReadFile(w("buckets.md"))
	must(err)
	d.Buckets = strings.TrimSpace(string(buckets))
	rush, err := os.ReadFile(w("admission.md"))
	must(err)
	d.AdmissionRush = strings.TrimSpace(string(rush))
	busy, err := os.ReadFile(w("admission-busy.md"))
	must(err)
	d.AdmissionBusy = strings.TrimSpace(string(busy))
	idle, err := os.ReadFile(w("idle.md"))
	must(err)
	d.Idle = strings.TrimSpace(string(idle))
	skus, err := os.ReadFile(w("skus.md"))
	must(err)
	d.Skus = strings.TrimSpace(string(skus))
	schemes, err := os.ReadFile(w("schemes.md"))
	must(err)
	d.Schemes = strings.TrimSpace(string(schemes))
	failover, err := os.ReadFile(w("schemes-failover.md"))
	must(err)
	d.SchemesFailover = strings.TrimSpace(string(failover))
	truth, err := os.ReadFile(w("truth.md"))
	must(err)
	d.Truth = strings.TrimSpace(string(truth))
	truthBusy, err := os.ReadFile(w("truth-busy.md"))
	must(err)
	d.TruthBusy = strings.TrimSpace(string(truthBusy))
	for _, f := range []struct {
		file string
		to   *string
	}{{"truth1k.md", &d.Truth1k}, {"truth-account.md", &d.TruthAccount}, {"truth1k-account.md", &d.Truth1kAcct}} {
		b, err := os.ReadFile(w(f.file))
		must(err)
		*f.to = strings.TrimSpace(string(b))
	}
	hot, err := benchLines(w("hot.txt"))
	must(err)
	d.Hot = strings.TrimSpace(hot)
	d.Outcome, err = ReadReport(w("outcome.json"))
	must(err)
	if err == nil && d.Outcome.Outcomes == nil {
		must(errors.New("outcome.json: the run did not wait for the outcomes (-wait-outcome)"))
	}
	wait, err := benchLines(w("statuswait.txt"))
	must(err)
	d.StatusWait = strings.TrimSpace(wait)
	for _, t := range []struct {
		dst  *cpuTable
		file string
	}{{&d.cpuNew, "cpu.md"}, {&d.cpuBase, "cpu-base.md"}, {&d.cpuTwo, "cpu-2loops.md"},
		{&d.cpuMetrics, "cpu-metrics.md"}, {&d.cpuMetricsBase, "cpu-mbase.md"}} {
		*t.dst, err = readCPUTable(w(t.file))
		must(err)
	}
	old, err := os.ReadFile(w("base-benchmarks.md"))
	must(err)
	big, err := readBigArgs(w("bigarg.txt"))
	must(err)
	cost, err := readCost(w("cost.tsv"))
	must(err)
	seeds, err := readSeedsCPU(w("seedscpu.tsv"))
	must(err)
	if err == nil && cost.rows != nil {
		d.Cost, d.CostRatios = costTable(cost), costRatios(cost, seeds)
		d.Profiles, err = profileTable(run.Work, cost)
		must(err)
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	d.CPU = d.cpuRows()
	d.Metrics = d.metricsRows()
	if d.Admission, err = d.admissionRows(); err != nil {
		return "", err
	}
	if d.BuyPerGet, err = d.cpuNew.perGet("successful SECKILL.BUY"); err != nil {
		return "", err
	}
	if d.BuyPerGetBase, err = d.cpuBase.perGet("successful SECKILL.BUY"); err != nil {
		return "", err
	}
	d.PassCompare = passCompare(string(old), d.Pass)
	d.OldSeeds = "-"
	if m := regexp.MustCompile(`proxy/seeds throughput ratio: \*\*([\d.]+)\*\*`).FindStringSubmatch(string(old)); m != nil {
		d.OldSeeds = m[1]
	}
	d.BigArgs = big
	var b strings.Builder
	t := template.Must(template.New("benchmarks").Funcs(template.FuncMap{
		"f0":  func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) },
		"f1":  func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
		"f2":  func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
		"div": func(a, b float64) float64 { return a / b },
		"ms":  func(us int64) string { return strconv.FormatFloat(float64(us)/1000, 'f', 0, 64) },
	}).Parse(benchTemplate))
	if err := t.Execute(&b, d); err != nil {
		return "", err
	}
	return b.String(), nil
}

// medianRun is the report of median throughput among base.1.json, base.2.json, base.3.json.
func medianRun(base string) (Report, error) {
	var runs []Report
	for i := 1; i <= 3; i++ {
		r, err := ReadReport(fmt.Sprintf("%s.%d.json", base, i))
		if err != nil {
			return Report{}, err
		}
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b Report) int {
		switch {
		case a.Throughput < b.Throughput:
			return -1
		case a.Throughput > b.Throughput:
			return 1
		}
		return 0
	})
	return runs[1], nil
}

// ordersPerSecond reads the orders/s metric of the first `go test -bench` result whose name
// begins with name.
func ordersPerSecond(path, name string) (float64, error) {
	re := regexp.MustCompile(regexp.QuoteMeta(name) + `\S*\s+\d+\s+.*?([\d.]+) orders/s`)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	m := re.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("%s: no %s result with orders/s", path, name)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// tableBody is a bench script's output less its first line (the date and settings).
func tableBody(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 3 {
		return "", fmt.Errorf("%s: no table", path)
	}
	return strings.Join(lines[1:], "\n"), nil
}

// benchLines are the result lines of `go test -bench` output.
func benchLines(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "Benchmark") {
			b.WriteString(sc.Text() + "\n")
		}
	}
	return b.String(), sc.Err()
}

// cells are the cells of a Markdown table row.
func cells(line string) []string {
	cs := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i := range cs {
		cs[i] = strings.TrimSpace(cs[i])
	}
	return cs
}

func isDigits(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// passRatios are the proxy/twemproxy and proxy/direct ratios of a pass-through table, by
// (upstream, test, pipeline depth), in the table's order.
func passRatios(table string) (order [][3]string, ratios map[[3]string][2]string) {
	ratios = map[[3]string][2]string{}
	for line := range strings.Lines(table) {
		cs := cells(line)
		if len(cs) != 8 || !isDigits(cs[2]) {
			continue
		}
		key := [3]string{cs[0], cs[1], cs[2]}
		if _, dup := ratios[key]; !dup {
			order = append(order, key)
		}
		ratios[key] = [2]string{cs[6], cs[7]}
	}
	return order, ratios
}

// passCompare is the pass-through ratios of this run beside those in the baseline's
// BENCHMARKS.md (old).
func passCompare(old, now string) string {
	if a, b := strings.Index(old, "## (d)"), strings.Index(old, "## (e)"); a >= 0 && b > a {
		old = old[a:b]
	} else {
		old = ""
	}
	_, before := passRatios(old)
	order, after := passRatios(now)
	var rows []string
	for _, key := range order {
		o, ok := before[key]
		if !ok {
			o = [2]string{"-", "-"}
		}
		n := after[key]
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s |", key[0], key[1], key[2], o[0], n[0], o[1], n[1]))
	}
	return strings.Join(rows, "\n")
}

// readBigArgs is table (g) from BenchmarkLargeArgument's output: time per SET, GET and
// unknown command NAME of each size, straight to redis-server, through the proxy in front of
// it and through the proxy in front of the cluster, and the longest another client waited
// meanwhile (its other-max-ms metric).
func readBigArgs(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	re := regexp.MustCompile(`(?m)^BenchmarkLargeArgument/(SET|GET|NAME)/(\d+)MiB/(redis|proxy-cluster|proxy)-\d+\s+\d+\s+(\d+) ns/op(?:.*?([\d.]+) other-max-ms)?`)
	type cell struct{ ms, waited float64 }
	got := map[[3]string]cell{}
	var sizes []int
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		ns, _ := strconv.ParseFloat(m[4], 64)
		waited, _ := strconv.ParseFloat(m[5], 64)
		got[[3]string{m[1], m[2], m[3]}] = cell{ns / 1e6, waited}
		if n, _ := strconv.Atoi(m[2]); !slices.Contains(sizes, n) {
			sizes = append(sizes, n)
		}
	}
	if len(got) == 0 {
		return "", fmt.Errorf("%s: no BenchmarkLargeArgument results", path)
	}
	slices.Sort(sizes)
	var rows []string
	for _, op := range []string{"GET", "NAME", "SET"} {
		for _, size := range sizes {
			at := func(target string) (cell, bool) {
				c, ok := got[[3]string{op, strconv.Itoa(size), target}]
				return c, ok
			}
			r, okR := at("redis")
			p, okP := at("proxy")
			c, okC := at("proxy-cluster")
			if !okR || !okP || !okC || r.ms == 0 {
				continue
			}
			rows = append(rows, fmt.Sprintf("| %s | %d MiB | %.0f | %.0f | %.2f | %.0f | %.2f | %.0f / %.0f / %.0f |",
				op, size, r.ms, p.ms, p.ms/r.ms, c.ms, c.ms/r.ms, r.waited, p.waited, c.waited))
		}
	}
	table := strings.Join(rows, "\n")
	top := sizes[len(sizes)-1]
	r, okR := got[[3]string{"GET", strconv.Itoa(top), "redis"}]
	p, okP := got[[3]string{"GET", strconv.Itoa(top), "proxy"}]
	c, okC := got[[3]string{"GET", strconv.Itoa(top), "proxy-cluster"}]
	if !okR || !okP || !okC || r.ms == 0 {
		return table, fmt.Errorf("%s: no GET of %d MiB on every target", path, top)
	}
	verdict := "met"
	if p.ms/r.ms > BigGetGoal || c.ms/r.ms > BigGetGoal {
		verdict = BigGetMissed
	}
	return table + fmt.Sprintf("\n\nRatio check: a GET of %d MiB through the proxy takes %.2fx redis-server's time, %.2fx in front of the cluster; the goal is at most %.0fx: **%s**.",
		top, p.ms/r.ms, c.ms/r.ms, BigGetGoal, verdict), nil
}

// BigGetGoal is table (g)'s ratio check: a GET of the biggest size takes at most this many
// times redis-server's time through the proxy. BigGetMissed marks the report when it does not
// (scripts/bench.sh then fails, after the report is written).
const (
	BigGetGoal   = 2.0
	BigGetMissed = "NOT met"
)
