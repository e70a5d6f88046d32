package loadtest

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// The tables that the fault suite (scripts/chaos.sh, RELIABILITY.md) and the admission bench
// (scripts/bench-admission.sh) print, made from seckill-bench's own -json report.

// ReadReport reads a report that seckill-bench -json wrote.
func ReadReport(path string) (Report, error) {
	var r Report
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// FaultRun is one run of a fault during a sale.
type FaultRun struct {
	Fault    string
	Run      int
	Injected string // seconds into the sale, as the suite printed them
	LastedMs int64  // how long the fault lasted
	ExitCode int    // seckill-bench's
}

// FaultHeader is the fault table's header.
const FaultHeader = "| fault | run | checks | injected at (s) | fault lasted (ms) | error window (ms) | drain (ms) | UNAVAILABLE | other errors | replies lost | rejected |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|"

// FaultRow is the fault table's row for run, from its report, or, when there is none (rep
// nil), with lastWords, the last line seckill-bench wrote on stderr.
func FaultRow(run FaultRun, rep *Report, lastWords string) string {
	head := fmt.Sprintf("| %s | %d | ", run.Fault, run.Run)
	if rep == nil {
		if lastWords = strings.TrimSpace(lastWords); lastWords == "" {
			lastWords = "nothing on stderr"
		}
		lastWords = strings.ReplaceAll(lastWords, "|", "/")
		if len(lastWords) > 300 {
			lastWords = lastWords[:300]
		}
		return head + fmt.Sprintf("**FAIL** (no report, rc %d: %s) | %s | %d | - | - | - | - | - | - |", run.ExitCode, lastWords, run.Injected, run.LastedMs)
	}
	verdict := "pass"
	if !rep.Passed || run.ExitCode != 0 {
		var failed []string
		for _, c := range rep.Checks {
			if !c.OK {
				failed = append(failed, c.Name)
			}
		}
		verdict = fmt.Sprintf("**FAIL** (rc %d)", run.ExitCode)
		if len(failed) > 0 {
			verdict = "**FAIL** (" + strings.Join(failed, ", ") + ")"
		}
	}
	return head + fmt.Sprintf("%s | %s | %d | %.0f | %.0f | %d | %d | %d | %d |", verdict, run.Injected, run.LastedMs,
		rep.ErrorWindowMs, rep.DrainMs, rep.Replies[ReplyUnavailable], rep.Replies[ReplyOther], rep.LostReplies, rep.Rejected)
}

// AdmissionTable is the admission bench's table for a sale warmed with rate and burst: the
// orders a second, and the share of the rate delivered once the burst is spent.
func AdmissionTable(rep Report, rate, burst int) string {
	secs := rep.ElapsedMs / 1000
	orders := rep.Replies[ReplyOrder]
	var other []string
	for k, v := range rep.Replies {
		if k != ReplyOrder && k != ReplyLimited {
			other = append(other, fmt.Sprintf("%s %d", k, v))
		}
	}
	sort.Strings(other)
	if len(other) == 0 {
		other = []string{"none"}
	}
	perSec, delivered := 0.0, 0.0
	if secs > 0 && rate > 0 {
		perSec = float64(orders) / secs
		delivered = float64(orders-int64(burst)) / (float64(rate) * secs)
	}
	return "| rate | burst | requests | seconds | requests/s | orders | orders/s | delivered | other replies |\n" +
		"|---|---|---|---|---|---|---|---|---|\n" +
		fmt.Sprintf("| %d | %d | %d | %.1f | %.0f | %d | %.0f | %.3f | %s |", rate, burst, rep.Requests, secs,
			rep.Throughput, orders, perSec, delivered, strings.Join(other, ", "))
}
