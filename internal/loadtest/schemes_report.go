package loadtest

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// SchemesTable is RunSchemes' results as a markdown table, a row per scheme.
func SchemesTable(rs []SchemeResult) string {
	var b strings.Builder
	b.WriteString("| scheme | an order is | orders/s | last order after | requests/s | p99 | machine CPU per order | orders told | units kept | oversell | unsold | other replies |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f ms | %.0f | %s | %s | %d | %d | %d | %d | %s |\n",
			r.Scheme, r.Holds, r.OrdersPerSec, r.SellMs, r.RequestsPerS, us(r.P99us), cpuPerOrder(r),
			r.Orders, r.OrderUnits, r.Oversell, r.Unsold, otherReplies(r.Replies))
	}
	return b.String()
}

// SchemesFailoverTable is RunSchemes' results under a failover (-failover) as a markdown
// table: what each scheme told its buyers against what it kept.
func SchemesFailoverTable(rs []SchemeResult) string {
	var b strings.Builder
	b.WriteString("| scheme | round | the failover | orders told | units kept | oversell | told, not kept | UNAVAILABLE | other replies | error window |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %d | %d | %d | %d | %s | %.0f ms |\n", r.Scheme, r.Round, r.Failover, r.Orders, r.OrderUnits,
			r.Oversell, r.NotKept, r.Replies[ReplyUnavailable], otherReplies(r.Replies), r.ErrorWindowMs)
	}
	return b.String()
}

func cpuPerOrder(r SchemeResult) string {
	if r.CPUPerOrderMs <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f ms", r.CPUPerOrderMs)
}

// otherReplies are the replies that are neither an order nor a sold-out answer, by kind.
func otherReplies(replies map[string]int64) string {
	var kinds []string
	for k, n := range replies {
		if k != ReplyOrder && k != ReplySoldOut && n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(kinds) == 0 {
		return "none"
	}
	slices.Sort(kinds)
	return strings.Join(kinds, ", ")
}

// schemePanel is one chart of WriteSchemesChart: a bar per scheme.
type schemePanel struct {
	title string
	log   bool // a log scale: the schemes differ by orders of magnitude
	value func(SchemeResult) float64
	label func(float64) string
	// wrong: any value above 0 is a failure, drawn red.
	wrong bool
}

// ms labels a time in milliseconds, in µs below a tenth of one.
func ms(v float64) string {
	if v < 0.1 {
		return fmt.Sprintf("%.0f µs", v*1000)
	}
	return fmt.Sprintf("%.1f ms", v)
}

var schemePanels = []schemePanel{
	{"orders per second (log scale; more is better)", true, func(r SchemeResult) float64 { return r.OrdersPerSec },
		func(v float64) string { return fmt.Sprintf("%.0f", v) }, false},
	{"machine CPU per order, ms (log scale; less is better)", true, func(r SchemeResult) float64 { return r.CPUPerOrderMs },
		func(v float64) string { return fmt.Sprintf("%.2f ms", v) }, false},
	{"p99 latency of a buy, ms (log scale; less is better)", true, func(r SchemeResult) float64 { return float64(r.P99us) / 1000 },
		ms, false},
	{"units sold beyond the stock (oversell; 0 is the only right answer)", false, func(r SchemeResult) float64 { return float64(r.Oversell) },
		func(v float64) string { return fmt.Sprintf("%.0f", v) }, true},
}

// failoverPanel shows, for each scheme of rs, the worst round of failover (a -failover run's
// results): the units sold beyond the stock or told and not kept. A scheme with no round
// there (no Redis master to fail over) gets no bar.
func failoverPanel(failover []SchemeResult) schemePanel {
	worst := map[string]float64{}
	rounds := 0
	for _, r := range failover {
		worst[r.Scheme] = max(worst[r.Scheme], float64(max(r.Oversell, r.NotKept)))
		rounds = max(rounds, r.Round)
	}
	return schemePanel{
		title: fmt.Sprintf("a master failed over mid-sale: units sold beyond the stock or told and not kept (worst of %d rounds)", rounds),
		value: func(r SchemeResult) float64 {
			if v, ok := worst[r.Scheme]; ok {
				return v
			}
			return math.NaN()
		},
		label: func(v float64) string {
			if math.IsNaN(v) {
				return "no Redis master to fail over"
			}
			return fmt.Sprintf("%.0f", v)
		},
		wrong: true,
	}
}

// WriteSchemesChart writes a self-contained SVG of rs: one panel per measure, a labelled bar
// per scheme, and with the results of a -failover run, a panel of what a failover cost. It
// needs no script or network to open.
func WriteSchemesChart(w io.Writer, title string, rs, failover []SchemeResult) error {
	if len(rs) == 0 {
		return ErrNoRequests
	}
	panels := schemePanels
	if len(failover) > 0 {
		panels = append(slices.Clip(panels), failoverPanel(failover))
	}
	const width, labelW, pad, barH, gap = 900, 130, 20, 18, 4
	panelH := 24 + len(rs)*(barH+gap) + pad
	height := 40 + len(panels)*panelH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="24" font-size="16">%s</text>`+"\n", pad, html.EscapeString(title))
	for i, p := range panels {
		y := 40 + i*panelH
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", pad, y+14, html.EscapeString(p.title))
		scale := panelScale(p, rs)
		for j, r := range rs {
			by := y + 24 + j*(barH+gap)
			v := p.value(r)
			bw := scale(v) * float64(width-labelW-2*pad-90)
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", pad, by+13, html.EscapeString(r.Scheme))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW, by, bw, barH, schemeColor(p, v))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(labelW)+bw+6, by+13, html.EscapeString(p.label(v)))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// panelScale maps a panel's values to [0, 1] of the bar's room: linear from 0, or log10 from
// a decade below the least value above 0.
func panelScale(p schemePanel, rs []SchemeResult) func(float64) float64 {
	hi, lo := 0.0, math.Inf(1)
	for _, r := range rs {
		v := p.value(r)
		if math.IsNaN(v) {
			continue
		}
		hi = max(hi, v)
		if v > 0 {
			lo = min(lo, v)
		}
	}
	if hi <= 0 {
		return func(float64) float64 { return 0 }
	}
	if !p.log {
		return func(v float64) float64 {
			if math.IsNaN(v) {
				return 0
			}
			return max(0, v) / hi
		}
	}
	floor := math.Log10(lo) - 1
	span := math.Log10(hi) - floor
	return func(v float64) float64 {
		if v <= 0 || math.IsNaN(v) {
			return 0
		}
		return (math.Log10(v) - floor) / span
	}
}

// schemeColor is red for a wrong value, else blue.
func schemeColor(p schemePanel, v float64) string {
	if p.wrong && v > 0 {
		return "#c62828"
	}
	return "#1565c0"
}
