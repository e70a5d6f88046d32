package loadtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchReport: BENCHMARKS.md made from a make bench work directory (testdata/bench, its
// files as the bench scripts write them) is, line for line, the golden file. The golden began
// as the output of the Python report this replaced, on the same files, and was read by hand
// for each change since (table (g) now reads NAME, the cluster and the other client's wait).
func TestBenchReport(t *testing.T) {
	got, err := BenchReport(BenchRun{Work: "testdata/bench", Requests: 300000, Base: "73f24fa", MetricsBase: "2ca946a",
		Now: time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC), Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/bench/BENCHMARKS.golden.md")
	if err != nil {
		t.Fatal(err)
	}
	g, w := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("line %d:\n got %q\nwant %q", i+1, gl, wl)
		}
	}
	for _, s := range []string{"FAILED: one per buyer", "| GET | 64 MiB | 56 | 130 | 2.32 | 120 | 2.14 | 12 / 9 / 3 |", "| NAME | 64 MiB | 123 | 64 | 0.52 | 31 | 0.25 | 16 / 14 / 9 |"} {
		if !strings.Contains(got, s) {
			t.Errorf("the report lacks %q", s)
		}
	}
}

// TestBenchReportMissing: a work directory that lacks a file is an error that names it, not
// a report with holes.
func TestBenchReportMissing(t *testing.T) {
	dir := t.TempDir()
	entries, err := os.ReadDir("testdata/bench")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "sink.txt" || strings.HasSuffix(e.Name(), ".golden.md") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata/bench", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := BenchReport(BenchRun{Work: dir, Requests: 1}); err == nil || !strings.Contains(err.Error(), "sink.txt") {
		t.Fatalf("without sink.txt: %v, want an error naming it", err)
	}
}
