package loadtest

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
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

// ReadReports reads the reports at paths, comma-separated, as one: the runs of several load
// processes at once (each driving its own proxy), their requests and replies summed, over the
// longest one's time.
func ReadReports(paths string) (Report, error) {
	var out Report
	for i, p := range strings.Split(paths, ",") {
		r, err := ReadReport(p)
		if err != nil {
			return out, err
		}
		if i == 0 {
			out = r
			out.Replies = map[string]int64{}
		} else {
			out.ElapsedMs = max(out.ElapsedMs, r.ElapsedMs)
			out.Requests += r.Requests
			out.Passed = out.Passed && r.Passed
			if r.Slowest != nil && (out.Slowest == nil || r.Slowest.Ms > out.Slowest.Ms) {
				out.Slowest = r.Slowest
			}
		}
		for k, v := range r.Replies {
			out.Replies[k] += v
		}
		out.ProcessOrders = append(out.ProcessOrders, r.Replies[ReplyOrder])
		if i > 0 {
			out.StartUnixMs, out.OrdersPer100ms = mergeTimelines(out.StartUnixMs, out.OrdersPer100ms, r.StartUnixMs, r.OrdersPer100ms)
		}
	}
	if out.ElapsedMs > 0 {
		out.Throughput = float64(out.Requests) / (out.ElapsedMs / 1000)
	}
	return out, nil
}

// mergeTimelines adds two runs' orders per 100 ms, lined up by when each began.
func mergeTimelines(aStart int64, a []int64, bStart int64, b []int64) (int64, []int64) {
	if aStart == 0 || bStart == 0 {
		return aStart, nil // a report without a timeline (an older seckill-bench): none
	}
	start := min(aStart, bStart)
	offA, offB := int((aStart-start)/100), int((bStart-start)/100)
	out := make([]int64, max(offA+len(a), offB+len(b)))
	for i, n := range a {
		out[offA+i] += n
	}
	for i, n := range b {
		out[offB+i] += n
	}
	return start, out
}

// WorstWindow is the fewest orders in any 500 ms of the timeline after its first 500 ms (the
// burst), among the windows that end before its last 100 ms (the run winding down); -1 when
// the run is too short to have one.
func WorstWindow(per100ms []int64) int64 {
	worst := int64(-1)
	for i := 5; i+5 < len(per100ms); i++ {
		var n int64
		for _, v := range per100ms[i : i+5] {
			n += v
		}
		if worst < 0 || n < worst {
			worst = n
		}
	}
	return worst
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
const FaultHeader = "| fault | run | checks | injected at (s) | fault lasted (ms) | error window (ms) | drain (ms) | UNAVAILABLE (not known) | of them confirmed | other errors | replies lost | rejected | told bought, then rejected | bought → stored p50 / p99 / max (ms) |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

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
		return head + fmt.Sprintf("**FAIL** (no report, rc %d: %s) | %s | %d | - | - | - | - | - | - | - | - | - |", run.ExitCode, lastWords, run.Injected, run.LastedMs)
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
	return head + fmt.Sprintf("%s | %s | %d | %.0f | %.0f | %d | %d | %d | %d | %d | %d | %s |", verdict, run.Injected, run.LastedMs,
		rep.ErrorWindowMs, rep.DrainMs, rep.Replies[ReplyUnavailable], rep.NotKnownConfirmed, rep.Replies[ReplyOther], rep.LostReplies,
		rep.Rejected, rep.ToldRejected, storedDelay(rep.Outcomes))
}

// storedDelay is the fault table's bought -> stored cell: the delay's p50 / p99 / max in ms,
// and the buyers whose wait ended pending, or "-" for a run whose buyers did not wait.
func storedDelay(o *Outcomes) string {
	if o == nil {
		return "-"
	}
	ms := func(us int64) string { return fmt.Sprintf("%.0f", float64(us)/1000) }
	out := ms(o.Delay.P50) + " / " + ms(o.Delay.P99) + " / " + ms(o.Delay.Max)
	if o.Pending > 0 || o.Errors > 0 {
		out += fmt.Sprintf(" (%d pending, %d errors)", o.Pending, o.Errors)
	}
	return out
}

// admission is what the admission bench measured of a sale warmed with rate and burst.
type admission struct {
	secs, perSec, delivered float64
	orders                  int64
	other                   string // the replies other than an order or LIMITED, or "none"
}

func admissionOf(rep Report, rate, burst int) admission {
	a := admission{secs: rep.ElapsedMs / 1000, orders: rep.Replies[ReplyOrder]}
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
	a.other = strings.Join(other, ", ")
	if a.secs > 0 && rate > 0 {
		a.perSec = float64(a.orders) / a.secs
		a.delivered = float64(a.orders-int64(burst)) / (float64(rate) * a.secs)
	}
	return a
}

// AdmissionTable is the admission bench's table for a sale warmed with rate and burst: the
// orders a second, and the share of the rate delivered once the burst is spent.
// The worst 500 ms after the first (the goal: at least half the rate's share, rate/4), the
// split of the orders between the load processes (one per proxy), and the UNAVAILABLE replies
// are its last columns.
func AdmissionTable(rep Report, rate, burst int) string {
	a := admissionOf(rep, rate, burst)
	split := make([]string, len(rep.ProcessOrders))
	for i, n := range rep.ProcessOrders {
		split[i] = strconv.FormatInt(n, 10)
	}
	worst := "-"
	if w := WorstWindow(rep.OrdersPer100ms); w >= 0 {
		worst = strconv.FormatInt(w, 10)
	}
	return "| rate | burst | requests | seconds | requests/s | orders | orders/s | delivered | worst 500 ms | split | UNAVAILABLE | other replies |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|---|\n" +
		fmt.Sprintf("| %d | %d | %d | %.1f | %.0f | %d | %.0f | %.3f | %s | %s | %d | %s |", rate, burst, rep.Requests, a.secs,
			rep.Throughput, a.orders, a.perSec, a.delivered, worst, strings.Join(split, " / "), rep.Replies[ReplyUnavailable], a.other)
}

// MinDelivered is the share of its rate the admission rush must deliver, burst aside.
const MinDelivered = 0.95

// AdmissionRushRow is the fault table's row of an admission-rush run (scripts/bench-admission.sh
// exiting rc, with its report rep, nil when it wrote none): a pass when the proxies delivered
// at least MinDelivered of the rate, gave no reply but an order or LIMITED, and admitted at
// least half the rate's share (rate/4) in every 500 ms after the first, and the script passed
// (rc 0: MySQL confirmed exactly the orders told).
func AdmissionRushRow(run int, rep *Report, rc, rate, burst int) string {
	tail := " | - | - | - | - | 0 | 0 | 0 | 0 | 0 | 0 | - |"
	if rep == nil {
		return fmt.Sprintf("| admission-rush | %d | **FAIL** (no result, rc %d)%s", run, rc, tail)
	}
	a := admissionOf(*rep, rate, burst)
	worst := WorstWindow(rep.OrdersPer100ms)
	verdict := "pass"
	if rc != 0 || a.delivered < MinDelivered || a.other != "none" || worst >= 0 && worst < int64(rate/4) {
		verdict = "**FAIL**"
	}
	if rc != 0 {
		verdict += fmt.Sprintf(" (rc %d: see the run's admission.err)", rc)
	}
	return fmt.Sprintf("| admission-rush | %d | %s (delivered %.3f of RATE %d: %d orders in %.1f s, %.0f requests/s; worst 500 ms %d orders; other replies: %s)%s",
		run, verdict, a.delivered, rate, a.orders, a.secs, rep.Throughput, worst, a.other, tail)
}

var clockLine = regexp.MustCompile(`first order (\S+) after START, ended (\S+) after END`)

// ClockOffRow is the fault table's row of a clock-off run: TestProxyClockOff's verbose log
// and go test's exit status.
func ClockOffRow(run int, testLog string, rc int) string {
	tail := " | - | - | - | - | 0 | 0 | 0 | 0 | 0 | 0 | - |"
	if rc != 0 {
		return fmt.Sprintf("| clock-off | %d | **FAIL** (go test exit %d)%s", run, rc, tail)
	}
	var got []string
	for _, m := range clockLine.FindAllStringSubmatch(testLog, -1) {
		got = append(got, m[1]+" / "+m[2])
	}
	return fmt.Sprintf("| clock-off | %d | pass (first order / end after Redis's START / END, proxy ahead: %s)%s",
		run, strings.Join(got, "; behind: "), tail)
}

// Suite says how the fault suite ran, for its report's opening.
type Suite struct {
	Command             string // the command line
	Faults, Runs        int
	RunsSet             string // the CHAOS_RUNS_<FAULT> settings, or "none"
	Buyers, Conns, Rate int
	Cores               int
	When                string
	Commit              string // what was measured (Revision)
}

// FaultIntro is the opening of the fault suite's report, up to its table.
func FaultIntro(s Suite) string {
	return fmt.Sprintf(`# Reliability: faults during real sales

Measured by `+"`%s`"+` (%d faults, %d runs each, or as CHAOS_RUNS_<FAULT> says: %s) at commit %s on %s, on a machine with
%d cores that also runs the dev stack. Each run: a sale of 2,000 units, %d requests over
%d connections at %d requests per second through two proxies, two sinks in one group; the
fault at a random moment while units sell, healed, then the drain and seckill-bench's checks under
faults (I1 no oversell, I2 every order handed out is in MySQL, I3 no duplicate buyer, every unit
Redis sold reached MySQL, the outbox drained). Columns: when the fault came after the load
started; how long it lasted until healed; the error window (from the first 100 ms sample with an
error reply to the end of the last); the drain (from the last buy until MySQL held every order);
buyers answered `+"`-UNAVAILABLE`"+`; other errors (a connection the killed proxy dropped); orders
in MySQL whose buyer was told nothing; orders MySQL rejected (units Redis sold that MySQL did
not have); bought → stored, the time from a buy's answer to its outcome for the buyers who got
an order, each of whom waited for it with `+"`SECKILL.STATUS ... WAIT`"+` (with how many waits
ended still pending). What each fault does: `+"`seckill-bench fault-plan -list`"+`.

%s`, s.Command, s.Faults, s.Runs, s.RunsSet, s.Commit, s.When, s.Cores, s.Buyers, s.Conns, s.Rate, FaultHeader)
}
