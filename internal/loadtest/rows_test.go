package loadtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestFaultRow(t *testing.T) {
	run := FaultRun{Fault: "master-kill", Run: 2, Injected: "0.75", LastedMs: 4972}
	rep := &Report{Passed: true, ErrorWindowMs: 3700, DrainMs: 9, Replies: map[string]int64{ReplyUnavailable: 1829},
		LostReplies: 1, NotKnownConfirmed: 7, Checks: []Check{{Name: "I1", OK: true}}}
	if got, want := FaultRow(run, rep, ""), "| master-kill | 2 | pass | 0.75 | 4972 | 3700 | 9 | 1829 | 7 | 0 | 1 | 0 | 0 | - |"; got != want {
		t.Errorf("a pass:\n%s\nwant\n%s", got, want)
	}
	rep.Outcomes = &Outcomes{Confirmed: 1990, Pending: 3, Delay: Percentiles{P50: 150_400, P99: 2_900_000, Max: 4_100_000}}
	if got, want := FaultRow(run, rep, ""), "| master-kill | 2 | pass | 0.75 | 4972 | 3700 | 9 | 1829 | 7 | 0 | 1 | 0 | 0 | 150 / 2900 / 4100 (3 pending, 0 errors) |"; got != want {
		t.Errorf("a pass:\n%s\nwant\n%s", got, want)
	}
	rep.Passed, rep.Checks = false, []Check{{Name: "I1 no oversell", OK: false}, {Name: "I2", OK: true}}
	if got := FaultRow(run, rep, ""); !strings.Contains(got, "| **FAIL** (I1 no oversell) |") {
		t.Errorf("a failed check: %s", got)
	}
	rep.Passed, rep.Checks, run.ExitCode = true, []Check{{Name: "I1", OK: true}}, 2
	if got := FaultRow(run, rep, ""); !strings.Contains(got, "| **FAIL** (rc 2) |") {
		t.Errorf("a bad exit: %s", got)
	}
	if got := FaultRow(run, nil, "dial | refused\n"); !strings.Contains(got, "**FAIL** (no report, rc 2: dial / refused) | 0.75 | 4972 | - |") {
		t.Errorf("no report: %s", got)
	}
	if got := FaultRow(run, nil, ""); !strings.Contains(got, "nothing on stderr") {
		t.Errorf("no report, no words: %s", got)
	}
	if n := strings.Count(FaultHeader, "\n") + 1; n != 2 || strings.Count(strings.Split(FaultHeader, "\n")[0], "|") != strings.Count(FaultRow(run, rep, ""), "|") {
		t.Errorf("the header and a row have different columns")
	}
}

func TestAdmissionTable(t *testing.T) {
	rep := Report{Requests: 100000, ElapsedMs: 10000, Throughput: 10000,
		Replies: map[string]int64{ReplyOrder: 10100, ReplyLimited: 89890, ReplyBusy: 10}}
	got := AdmissionTable(rep, 1000, 100)
	if !strings.HasSuffix(got, "| 1000 | 100 | 100000 | 10.0 | 10000 | 10100 | 1010 | 1.000 | - |  | 0 | BUSY 10 |") {
		t.Errorf("got\n%s", got)
	}
	if got := AdmissionTable(Report{Replies: map[string]int64{}}, 0, 0); !strings.HasSuffix(got, "| none |") {
		t.Errorf("an empty report: %s", got)
	}
}

// TestAdmissionWindows: two load processes' timelines line up by their start; the worst
// 500 ms leaves out the first 500 ms and the last 100 ms; the split is per process.
func TestAdmissionWindows(t *testing.T) {
	dir := t.TempDir()
	a := Report{Requests: 10, ElapsedMs: 1500, Replies: map[string]int64{ReplyOrder: 150, ReplyUnavailable: 2},
		StartUnixMs: 1000, OrdersPer100ms: []int64{50, 10, 10, 10, 10, 10, 10, 0, 0, 10, 10, 10, 10, 10, 0}}
	b := Report{Requests: 10, ElapsedMs: 1400, Replies: map[string]int64{ReplyOrder: 140},
		StartUnixMs: 1100, OrdersPer100ms: []int64{50, 10, 10, 10, 10, 10, 0, 0, 10, 10, 10, 10, 10, 0}}
	var paths []string
	for i, r := range []Report{a, b} {
		p := filepath.Join(dir, strconv.Itoa(i)+".json")
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	rep, err := ReadReports(strings.Join(paths, ","))
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{50, 60, 20, 20, 20, 20, 20, 0, 0, 20, 20, 20, 20, 20, 0}
	if !slices.Equal(rep.OrdersPer100ms, want) {
		t.Fatalf("merged timeline %v, want %v", rep.OrdersPer100ms, want)
	}
	if w := WorstWindow(rep.OrdersPer100ms); w != 60 {
		t.Errorf("worst 500 ms: %d, want 60 (bins 5-9)", w)
	}
	if got := AdmissionTable(rep, 500, 50); !strings.HasSuffix(got, "| 60 | 150 / 140 | 2 | UNAVAILABLE 2 |") {
		t.Errorf("table:\n%s", got)
	}
	if w := WorstWindow([]int64{1, 2, 3}); w != -1 {
		t.Errorf("a run too short for a window: %d", w)
	}
}

// TestAdmissionRushRow: a run passes when the proxies delivered at least 95% of the rate,
// burst aside, with no reply but an order or LIMITED, and bench-admission.sh exited 0; a run
// with other replies, too few orders, a failed script or no report fails.
func TestAdmissionRushRow(t *testing.T) {
	rep := Report{Requests: 400000, ElapsedMs: 10000, Throughput: 40000, Replies: map[string]int64{ReplyOrder: 5000, ReplyLimited: 395000},
		OrdersPer100ms: []int64{50, 25, 25, 25, 25, 25, 25, 25, 25, 25, 25, 25, 25, 25}}
	if got := AdmissionRushRow(1, &rep, 0, 500, 50); !strings.HasPrefix(got, "| admission-rush | 1 | pass (delivered 0.990 of RATE 500: 5000 orders in 10.0 s, 40000 requests/s; worst 500 ms 125 orders; other replies: none) |") {
		t.Errorf("a good run: %s", got)
	}
	few := rep
	few.Replies = map[string]int64{ReplyOrder: 4000, ReplyLimited: 396000}
	other := rep
	other.Replies = map[string]int64{ReplyOrder: 5000, ReplyLimited: 394999, ReplyUnavailable: 1}
	stall := rep
	stall.OrdersPer100ms = []int64{50, 25, 25, 25, 25, 25, 25, 25, 0, 0, 0, 0, 25, 25, 25, 25, 25, 25}
	for name, got := range map[string]string{
		"a stall":        AdmissionRushRow(6, &stall, 0, 500, 50),
		"too few orders": AdmissionRushRow(2, &few, 0, 500, 50),
		"other replies":  AdmissionRushRow(3, &other, 0, 500, 50),
		"rc 1":           AdmissionRushRow(4, &rep, 1, 500, 50),
		"no report":      AdmissionRushRow(5, nil, 1, 500, 50),
	} {
		if !strings.Contains(got, "**FAIL**") || strings.Count(got, "|") != 15 {
			t.Errorf("%s: %s, want a FAIL row of 14 cells", name, got)
		}
	}
}

// TestClockOffRow: the test's two measurements, ahead then behind, in a pass row; a failed
// test fails.
func TestClockOffRow(t *testing.T) {
	log := "=== RUN TestProxyClockOff\n    clock_test.go:80: ahead: first order 0.41s after START, ended 0.02s after END\n" +
		"    clock_test.go:80: behind: first order 0.03s after START, ended 0.40s after END\n--- PASS\n"
	want := "| clock-off | 1 | pass (first order / end after Redis's START / END, proxy ahead: 0.41s / 0.02s; behind: 0.03s / 0.40s) | - | - | - | - | 0 | 0 | 0 | 0 | 0 | 0 | - |"
	if got := ClockOffRow(1, log, 0); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := ClockOffRow(2, log, 1); !strings.Contains(got, "**FAIL** (go test exit 1)") {
		t.Errorf("a failed test: %s", got)
	}
}

// TestFaultIntro: the report's opening says what ran and ends with the table's header.
func TestFaultIntro(t *testing.T) {
	got := FaultIntro(Suite{Command: "scripts/chaos.sh 1 proxy-kill", Faults: 1, Runs: 1, RunsSet: "none", Buyers: 4000, Conns: 20, Rate: 500, Cores: 2, When: "2026-12-01 16:00 UTC", Commit: "`0123abc`"})
	for _, s := range []string{"at commit `0123abc` on 2026-12-01 16:00 UTC", "`scripts/chaos.sh 1 proxy-kill` (1 faults, 1 runs each", "4000 requests over\n20 connections at 500 requests", "fault-plan -list"} {
		if !strings.Contains(got, s) {
			t.Errorf("the opening lacks %q:\n%s", s, got)
		}
	}
	if !strings.HasSuffix(got, FaultHeader) {
		t.Error("the opening does not end with the table's header")
	}
}

// TestReadReports: the reports of two load processes read as one run: replies and requests
// summed, over the longer time, and the slower of their slowest answers.
func TestReadReports(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	for path, body := range map[string]string{
		a: `{"requests": 1000, "elapsed_ms": 2000, "replies": {"order": 400, "LIMITED": 600}, "passed": true, "slowest": {"ms": 12, "reply": "order"}}`,
		b: `{"requests": 3000, "elapsed_ms": 4000, "replies": {"order": 500, "LIMITED": 2499, "UNAVAILABLE": 1}, "passed": true, "slowest": {"ms": 1001, "reply": "UNAVAILABLE"}}`,
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := ReadReports(a + "," + b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 4000 || r.ElapsedMs != 4000 || r.Throughput != 1000 || r.Replies[ReplyOrder] != 900 || r.Replies[ReplyUnavailable] != 1 {
		t.Fatalf("merged %+v", r)
	}
	if r.Slowest == nil || r.Slowest.Ms != 1001 || r.Slowest.Reply != ReplyUnavailable {
		t.Fatalf("merged slowest %+v, want the second report's", r.Slowest)
	}
	if _, err := ReadReports(a + "," + filepath.Join(dir, "none.json")); err == nil {
		t.Fatal("a missing report read as nothing")
	}
}

// TestRevision: in this checkout (a test binary records no VCS information) the commit is
// git's HEAD, quoted as a table names it.
func TestRevision(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "--short=7", "HEAD").Output()
	if err != nil {
		t.Skip("no git checkout here: ", err)
	}
	if got := Revision(); !strings.HasPrefix(got, "`"+strings.TrimSpace(string(head))+"`") {
		t.Errorf("Revision() = %q, want HEAD %s", got, head)
	}
}
