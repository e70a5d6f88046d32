package loadtest

import (
	"strings"
	"testing"
)

func TestFaultRow(t *testing.T) {
	run := FaultRun{Fault: "master-kill", Run: 2, Injected: "0.75", LastedMs: 4972}
	rep := &Report{Passed: true, ErrorWindowMs: 3700, DrainMs: 9, Replies: map[string]int64{ReplyUnavailable: 1829},
		LostReplies: 1, Checks: []Check{{Name: "I1", OK: true}}}
	if got, want := FaultRow(run, rep, ""), "| master-kill | 2 | pass | 0.75 | 4972 | 3700 | 9 | 1829 | 0 | 1 | 0 |"; got != want {
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
	if !strings.HasSuffix(got, "| 1000 | 100 | 100000 | 10.0 | 10000 | 10100 | 1010 | 1.000 | BUSY 10 |") {
		t.Errorf("got\n%s", got)
	}
	if got := AdmissionTable(Report{Replies: map[string]int64{}}, 0, 0); !strings.HasSuffix(got, "| none |") {
		t.Errorf("an empty report: %s", got)
	}
}
