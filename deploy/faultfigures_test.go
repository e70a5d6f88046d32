package deploy

import (
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// RELIABILITY.md's columns that a quote may take a range from: times in ms, and counts.
var (
	// "checks" stands for the times a run's checks report ("proxy ahead: 8ms / 18ms").
	timeColumns  = []string{"fault lasted (ms)", "error window (ms)", "drain (ms)", "checks"}
	checksTime   = regexp.MustCompile(`(\d+)ms\b`)
	countColumns = []string{"UNAVAILABLE (not known)", "of them confirmed", "other errors", "replies lost", "rejected", "told bought, then rejected"}
	// quotedRange is a range quoted in DELIVERY.md's fault table: "5.1-5.2 s", "26-47
	// `-UNAVAILABLE`", "1,520-2,339 of 4,000 requests".
	quotedRange = regexp.MustCompile("(\\d[\\d,]*(?:\\.\\d+)?)-(\\d[\\d,]*(?:\\.\\d+)?) ?(ms|s|`-UNAVAILABLE`|of 4,000 requests|replies lost|connection errors|orders rejected|`-DRIFT`)")
	faultName   = regexp.MustCompile("`(-?[a-z]+(?:-[a-z]+)*)`")
)

// reliabilityRows reads RELIABILITY.md's runs: fault -> runs -> column -> cell.
func reliabilityRows(t *testing.T) map[string][]map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../RELIABILITY.md")
	if err != nil {
		t.Fatal(err)
	}
	var header []string
	out := map[string][]map[string]string{}
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "fault" {
			header = cells
			continue
		}
		if header == nil || len(cells) != len(header) {
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = cells[i]
		}
		out[cells[0]] = append(out[cells[0]], row)
	}
	if len(out) == 0 {
		t.Fatal("RELIABILITY.md has no runs")
	}
	return out
}

// namedFaults are the faults of RELIABILITY.md a row of DELIVERY.md names: `redis-cut`, and
// "`kafka-cut`, `-slow`" for kafka-slow.
func namedFaults(row string, known map[string][]map[string]string) []string {
	var out []string
	base := ""
	for _, m := range faultName.FindAllStringSubmatch(row, -1) {
		name := m[1]
		if strings.HasPrefix(name, "-") && base != "" {
			name = base + name
		} else if i := strings.Index(name, "-"); i > 0 {
			base = name[:i]
		}
		if _, ok := known[name]; ok {
			out = append(out, name)
		}
	}
	return out
}

// quoteMatches is whether a quoted figure (in seconds when inSeconds, else as the table has
// it) is v, to the quote's own decimals.
func quoteMatches(quote string, v float64, inSeconds bool) bool {
	q, err := strconv.ParseFloat(strings.ReplaceAll(quote, ",", ""), 64)
	if err != nil {
		return false
	}
	if inSeconds {
		v /= 1000
	}
	decimals := 0
	if _, frac, ok := strings.Cut(quote, "."); ok {
		decimals = len(frac)
	}
	scale := math.Pow(10, float64(decimals))
	return math.Round(v*scale) == math.Round(q*scale)
}

// TestFaultFiguresQuoteReliability: every range that docs/DELIVERY.md's fault table quotes
// for a fault it names ("error window 5.1-5.2 s", "26-47 `-UNAVAILABLE`") is the least and the
// most of one of RELIABILITY.md's columns over the runs of some of the faults the row names:
// a new make chaos that changes them fails here until the table is brought up to date.
func TestFaultFiguresQuoteReliability(t *testing.T) {
	runs := reliabilityRows(t)
	raw, err := os.ReadFile("../docs/DELIVERY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "## What each fault costs")
	if !ok {
		t.Fatal("docs/DELIVERY.md has no section \"What each fault costs\"")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	checked := 0
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		faults := namedFaults(line, runs)
		cells := strings.Split(strings.TrimSpace(line), " | ")
		last := cells[len(cells)-1]
		for _, q := range quotedRange.FindAllStringSubmatch(last, -1) {
			if len(faults) == 0 {
				t.Errorf("DELIVERY.md quotes %q for no fault of RELIABILITY.md it names: %.80s", q[0], line)
				continue
			}
			checked++
			if !rangeInRuns(q[1], q[2], q[3] == "ms" || q[3] == "s", q[3] == "s", faults, runs) {
				t.Errorf("DELIVERY.md quotes %q for %v, which is not the least and the most of a column of RELIABILITY.md's runs of them", q[0], faults)
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d quoted ranges checked: has the table's form changed?", checked)
	}
}

// rangeInRuns is whether lo-hi are the least and the most of one column over the runs of a
// non-empty subset of faults (a time column when isTime).
func rangeInRuns(lo, hi string, isTime, inSeconds bool, faults []string, runs map[string][]map[string]string) bool {
	columns := countColumns
	if isTime {
		columns = timeColumns
	}
	for subset := 1; subset < 1<<len(faults); subset++ {
		for _, col := range columns {
			least, most, n := math.Inf(1), math.Inf(-1), 0
			for i, f := range faults {
				if subset&(1<<i) == 0 {
					continue
				}
				for _, r := range runs[f] {
					for _, v := range cellValues(r, col) {
						least, most, n = min(least, v), max(most, v), n+1
					}
				}
			}
			if n > 0 && quoteMatches(lo, least, inSeconds) && quoteMatches(hi, most, inSeconds) {
				return true
			}
		}
	}
	return false
}

// cellValues are the figures of a run's column: its number, or the times its checks report.
func cellValues(run map[string]string, col string) []float64 {
	if col == "checks" {
		var out []float64
		for _, m := range checksTime.FindAllStringSubmatch(run[col], -1) {
			v, _ := strconv.ParseFloat(m[1], 64)
			out = append(out, v)
		}
		return out
	}
	v, err := strconv.ParseFloat(run[col], 64)
	if err != nil {
		return nil
	}
	return []float64{v}
}
