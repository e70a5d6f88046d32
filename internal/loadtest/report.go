package loadtest

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a run's summary, as printed and as -json writes it.
type Report struct {
	Mode       string           `json:"mode"`
	SKU        string           `json:"sku"`
	Units      int              `json:"units"`
	Requests   int64            `json:"requests"`
	Conns      int              `json:"conns"`
	Pipeline   int              `json:"pipeline"`
	ElapsedMs  float64          `json:"elapsed_ms"`
	Throughput float64          `json:"throughput_rps"`
	Latency    Percentiles      `json:"latency_us"`
	Replies    map[string]int64 `json:"replies"`
	FirstError string           `json:"first_error,omitempty"`
	Slowest    *Slowest         `json:"slowest,omitempty"`
	DrainMs    float64          `json:"drain_ms,omitempty"`
	// ErrorWindowMs spans the timeline's samples with an error reply (not an order, sold out,
	// duplicate or limited): from the first to the end of the last; 0 without any.
	ErrorWindowMs float64 `json:"error_window_ms"`
	// LostReplies are orders in MySQL whose buyer was told nothing (a fault cut the reply);
	// Rejected, the orders MySQL refused (checked with -faults).
	LostReplies int64 `json:"lost_replies"`
	Rejected    int64 `json:"rejected"`
	// ToldRejected are the buyers told "bought" whose order MySQL rejected (a failure, but
	// with RejectedOK); NotKnownConfirmed the buyers told UNAVAILABLE whose order stands.
	ToldRejected      int64   `json:"told_rejected"`
	NotKnownConfirmed int64   `json:"not_known_confirmed"`
	Checks            []Check `json:"checks,omitempty"`
	Passed            bool    `json:"passed"`
	// Outcomes are what the buyers saw who waited for their order's outcome (-wait-outcome).
	Outcomes *Outcomes `json:"outcomes,omitempty"`
	// StartUnixMs is when the run began, and OrdersPer100ms the orders it was told in each
	// 100 ms from then: several load processes' reports line up by it (admission-table).
	StartUnixMs    int64   `json:"start_unix_ms,omitempty"`
	OrdersPer100ms []int64 `json:"orders_per_100ms,omitempty"`
	// ProcessOrders are the orders of each load process, when reports were merged.
	ProcessOrders []int64 `json:"process_orders,omitempty"`
}

// Percentiles of latency, in microseconds.
type Percentiles struct {
	P50  int64 `json:"p50"`
	P90  int64 `json:"p90"`
	P99  int64 `json:"p99"`
	P999 int64 `json:"p99_9"`
	Max  int64 `json:"max"`
}

// NewReport summarises r.
func NewReport(mode, sku string, units int, l Load, r Result) Report {
	rep := Report{
		Mode: mode, SKU: sku, Units: units, Requests: r.Requests, Conns: l.Conns, Pipeline: l.Pipeline,
		ElapsedMs:  float64(r.Elapsed.Microseconds()) / 1000,
		Throughput: r.Throughput(),
		Replies:    r.Replies,
		FirstError: r.FirstError,
		Passed:     r.Requests > 0,
	}
	if !r.Start.IsZero() {
		rep.StartUnixMs = r.Start.UnixMilli()
	}
	if r.Slowest.Ms > 0 {
		rep.Slowest = &r.Slowest
	}
	for _, s := range r.Timeline {
		rep.OrdersPer100ms = append(rep.OrdersPer100ms, s.Replies[ReplyOrder])
	}
	first, last := -1, -1
	for i, s := range r.Timeline {
		for k, n := range s.Replies {
			if n > 0 && !slices.Contains([]string{ReplyOrder, ReplySoldOut, ReplyDuplicate, ReplyLimited}, k) {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
	}
	if first >= 0 {
		rep.ErrorWindowMs = float64((time.Duration(last-first+1) * sampleEvery).Milliseconds())
	}
	if r.Latency != nil && r.Latency.TotalCount() > 0 {
		h := r.Latency
		rep.Latency = Percentiles{P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90), P99: h.ValueAtQuantile(99),
			P999: h.ValueAtQuantile(99.9), Max: h.Max()}
	}
	return rep
}

// AddChecks records the invariant checks and the drain time.
func (rep *Report) AddChecks(checks []Check, drain time.Duration) {
	rep.Checks = checks
	rep.DrainMs = float64(drain.Microseconds()) / 1000
	for _, c := range checks {
		if !c.OK {
			rep.Passed = false
		}
	}
}

func us(v int64) string { return (time.Duration(v) * time.Microsecond).String() }

// WriteText prints the report as tables for people.
func (rep Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "sale\t%s (%s), %d units\n", rep.SKU, rep.Mode, rep.Units)
	fmt.Fprintf(tw, "load\t%d requests over %d connections, pipeline %d\n", rep.Requests, rep.Conns, rep.Pipeline)
	fmt.Fprintf(tw, "elapsed\t%.0f ms\n", rep.ElapsedMs)
	fmt.Fprintf(tw, "throughput\t%.0f requests/s\n", rep.Throughput)
	fmt.Fprintf(tw, "latency\tp50 %s\tp90 %s\tp99 %s\tp99.9 %s\tmax %s\n",
		us(rep.Latency.P50), us(rep.Latency.P90), us(rep.Latency.P99), us(rep.Latency.P999), us(rep.Latency.Max))
	kinds := make([]string, 0, len(rep.Replies))
	for k := range rep.Replies {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, rep.Replies[k])
	}
	fmt.Fprintf(tw, "replies\t%s\n", strings.Join(parts, ", "))
	if s := rep.Slowest; s != nil {
		fmt.Fprintf(tw, "slowest\t%.1f ms: %s %s (sent %.0f ms in)\n", s.Ms, s.Reply, s.Error, s.AfterMs)
	}
	if rep.FirstError != "" {
		fmt.Fprintf(tw, "first error\t%s\n", rep.FirstError)
	}
	if o := rep.Outcomes; o != nil {
		fmt.Fprintf(tw, "bought -> stored\tp50 %s\tp99 %s\tmax %s\t(confirmed %d, rejected %d, cancelled %d, pending at the wait's end %d, errors %d)\n",
			us(o.Delay.P50), us(o.Delay.P99), us(o.Delay.Max), o.Confirmed, o.Rejected, o.Cancelled, o.Pending, o.Errors)
	}
	if rep.DrainMs > 0 {
		fmt.Fprintf(tw, "drain\t%.0f ms from the last buy until the sale was entirely in MySQL\n", rep.DrainMs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Checks) > 0 {
		fmt.Fprintln(w, "\ninvariant checks:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, c := range rep.Checks {
			mark := "PASS"
			if !c.OK {
				mark = "FAIL"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", mark, c.Name, c.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	verdict := "all checks passed"
	if !rep.Passed {
		verdict = "FAILED"
	}
	_, err := fmt.Fprintf(w, "\n%s\n", verdict)
	return err
}
