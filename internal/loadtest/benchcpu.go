package loadtest

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The CPU tables of BENCHMARKS.md's report: read from a run, compared with the last report's.

func readCPUTable(path string) (cpuTable, error) {
	t := cpuTable{rows: map[[2]string]cpuRow{}}
	b, err := os.ReadFile(path)
	if err != nil {
		return t, err
	}
	for line := range strings.Lines(string(b)) {
		cs := cells(line)
		if len(cs) != 4 || !isDigits(cs[1]) {
			continue
		}
		us, err1 := strconv.ParseFloat(cs[2], 64)
		rps, err2 := strconv.ParseFloat(cs[3], 64)
		if err := errors.Join(err1, err2); err != nil {
			return t, fmt.Errorf("%s: %q: %w", path, line, err)
		}
		key := [2]string{cs[0], cs[1]}
		if _, dup := t.rows[key]; !dup {
			t.order = append(t.order, key)
		}
		t.rows[key] = cpuRow{us, rps}
	}
	if len(t.order) == 0 {
		return t, fmt.Errorf("%s: no rows", path)
	}
	return t, nil
}

// perGet is CPU per request of name over that of a pass-through GET, at -P 1.
func (t cpuTable) perGet(name string) (float64, error) {
	r, ok1 := t.rows[[2]string{name, "1"}]
	g, ok2 := t.rows[[2]string{"pass-through GET", "1"}]
	if !ok1 || !ok2 || g.us == 0 {
		return 0, fmt.Errorf("the CPU table has no %q or GET row at -P 1", name)
	}
	return r.us / g.us, nil
}

// against is a row per request of t that base measured too, in t's order, made by row from
// both measurements; a request base lacks is left out.
func (t cpuTable) against(base cpuTable, row func(key [2]string, now, before cpuRow) string) string {
	var rows []string
	for _, key := range t.order {
		if b, ok := base.rows[key]; ok {
			rows = append(rows, row(key, t.rows[key], b))
		}
	}
	return strings.Join(rows, "\n")
}

// cpuRows is table (h): this tree against the baseline, and with 2 loops. A request the
// baseline cannot serve (rate-limited buys: see (j)) is left out.
func (d *benchData) cpuRows() string {
	return d.cpuNew.against(d.cpuBase, func(key [2]string, n, b cpuRow) string {
		t := d.cpuTwo.rows[key]
		return fmt.Sprintf("| %s | %s | %.1f | %.1f | %.2f | %.1f | %.0f | %.0f | %.0f |",
			key[0], key[1], b.us, n.us, n.us/b.us, t.us, b.rps, n.rps, t.rps)
	})
}

// metricsRows is table (k): this tree against the revision before the metrics.
func (d *benchData) metricsRows() string {
	return d.cpuMetrics.against(d.cpuMetricsBase, func(key [2]string, n, b cpuRow) string {
		return fmt.Sprintf("| %s | %s | %.1f | %.1f | %.2f | %.0f | %.0f | %.2f |",
			key[0], key[1], b.us, n.us, n.us/b.us, b.rps, n.rps, n.rps/b.rps)
	})
}

// admissionRows is table (j): rate-limited buys against sold-out ones.
func (d *benchData) admissionRows() (string, error) {
	var rows []string
	for _, p := range []string{"1", "16"} {
		lim, ok1 := d.cpuNew.rows[[2]string{"rate-limited SECKILL.BUY", p}]
		sold, ok2 := d.cpuNew.rows[[2]string{"sold-out SECKILL.BUY", p}]
		if !ok1 || !ok2 {
			return "", fmt.Errorf("the CPU table has no rate-limited or sold-out row at -P %s", p)
		}
		rows = append(rows, fmt.Sprintf("| %s | %.1f | %.1f | %.0f | %.0f | %.2f |", p, sold.us, lim.us, sold.rps, lim.rps, lim.rps/sold.rps))
	}
	return strings.Join(rows, "\n"), nil
}
