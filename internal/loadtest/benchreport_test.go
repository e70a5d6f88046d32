package loadtest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestBenchReport: BENCHMARKS.md made from a make bench work directory (testdata/bench, its
// files as the bench scripts write them) is, line for line, the golden file. The golden began
// as the output of the Python report this replaced, on the same files, and was read by hand
// for each change since (table (g) now reads NAME, the cluster and the other client's wait).
// updateGolden rewrites the golden file from this run (go test -run TestBenchReport -update);
// read the diff before committing it.
var updateGolden = flag.Bool("update", false, "rewrite testdata/bench/BENCHMARKS.golden.md")

func TestBenchReport(t *testing.T) {
	work := t.TempDir()
	copyDir(t, "testdata/bench", work)
	writeProfile(t, filepath.Join(work, "cost.buy.1.pprof"), map[string]int64{
		"github.com/IBM/sarama.(*asyncProducer).dispatcher":             3,
		"internal/runtime/syscall/linux.Syscall6":                       10,
		"seckill-proxy/proxy.(*core).process":                           5,
		"runtime.mallocgc":                                              1,
		"github.com/redis/go-redis/v9.(*ClusterClient).processPipeline": 1,
	})
	got, err := BenchReport(BenchRun{Work: work, Requests: 300000, Base: "73f24fa", MetricsBase: "2ca946a",
		Now: time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC), Commit: "`0123abc`", Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	if *updateGolden {
		if err := os.WriteFile("testdata/bench/BENCHMARKS.golden.md", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
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
	for _, s := range []string{"FAILED: one per buyer", "| buy | 1 | 15% | 5% | 0% | 50% | 5% | 0% | 25% | 0% |", "| GET | 64 MiB | 56 | 130 | 2.32 | 120 | 2.14 | 12 / 9 / 3 |", "| NAME | 64 MiB | 123 | 64 | 0.52 | 31 | 0.25 | 16 / 14 / 9 |"} {
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

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeProfile writes a CPU profile whose samples are the given functions (each a stack of
// one frame), with the given counts of 10 ms.
func writeProfile(t *testing.T, path string, samples map[string]int64) {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
	}
	id := uint64(1)
	for name, n := range samples {
		fn := &profile.Function{ID: id, Name: name}
		loc := &profile.Location{ID: id, Line: []profile.Line{{Function: fn}}}
		p.Function, p.Location = append(p.Function, fn), append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{n, n * 10_000_000}})
		id++
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
}
