package loadtest

import (
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"time"
)

// WriteChart writes a self-contained SVG: p99 latency over time, the reply mix over time as
// stacked bars, one per timeline sample, and the stock left over time (units less qty per
// order so far), each with labelled axes and ticks (time in seconds, latency in ms, replies
// per second, units), and a legend of every reply kind. It needs no script or network to open.
func WriteChart(w io.Writer, title string, r Result, units, qty int) error {
	const width, height, pad, top = 900, 740, 50, 40
	plotH := (height - top - 4*pad) / 3
	n := len(r.Timeline)
	if n == 0 {
		return ErrNoRequests
	}
	var maxP99 int64 = 1
	var maxCount int64 = 1
	kinds := map[string]bool{}
	for _, s := range r.Timeline {
		maxP99 = max(maxP99, s.P99.Microseconds())
		var sum int64
		for k, v := range s.Replies {
			kinds[k] = true
			sum += v
		}
		maxCount = max(maxCount, sum)
	}
	// Every kind in the legend, in a fixed order, whether this run saw it or not.
	order := []string{ReplyOrder, ReplySoldOut, ReplyDuplicate, ReplyClosed, ReplyLimited, ReplyBusy, ReplyUnavailable, ReplyOther}
	for k := range kinds {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	colors := map[string]string{ReplyOrder: "#2e7d32", ReplySoldOut: "#9e9e9e", ReplyDuplicate: "#f9a825",
		ReplyClosed: "#6a1b9a", ReplyUnavailable: "#c62828", ReplyLimited: "#ef6c00", ReplyBusy: "#5d4037", ReplyOther: "#000000"}
	step := float64(width-2*pad) / float64(n)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="24" font-size="16">%s</text>`+"\n", pad, html.EscapeString(title))
	// Latency.
	y0 := top + pad + plotH
	fmt.Fprintf(&b, `<text x="%d" y="%d">p99 latency per %v (max %v)</text>`+"\n", pad, top+pad-8, sampleEvery, us(maxP99))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>`+"\n", pad, y0, width-pad, y0)
	var pts []string
	for i, s := range r.Timeline {
		x := float64(pad) + step*(float64(i)+0.5)
		y := float64(y0) - float64(s.P99.Microseconds())/float64(maxP99)*float64(plotH)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#1565c0" stroke-width="2" points="%s"/>`+"\n", strings.Join(pts, " "))
	yTicks(&b, pad, y0, plotH, func(f float64) string { return fmt.Sprintf("%.2f ms", f*float64(maxP99)/1000) })
	xTicks(&b, pad, y0, step, n)
	// Reply mix.
	y1 := y0 + pad + plotH
	fmt.Fprintf(&b, `<text x="%d" y="%d">replies per %v (max %d)</text>`+"\n", pad, y0+pad-8, sampleEvery, maxCount)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>`+"\n", pad, y1, width-pad, y1)
	for i, s := range r.Timeline {
		x := float64(pad) + step*float64(i)
		y := float64(y1)
		for _, k := range order {
			h := float64(s.Replies[k]) / float64(maxCount) * float64(plotH)
			if h <= 0 {
				continue
			}
			y -= h
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, y, max(step-1, 0.5), h, colors[k])
		}
	}
	perSec := float64(maxCount) / sampleEvery.Seconds()
	yTicks(&b, pad, y1, plotH, func(f float64) string { return fmt.Sprintf("%.0f/s", f*perSec) })
	xTicks(&b, pad, y1, step, n)
	// Stock left.
	y2 := y1 + pad + plotH
	fmt.Fprintf(&b, `<text x="%d" y="%d">stock left (of %d units)</text>`+"\n", pad, y1+pad-8, units)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>`+"\n", pad, y2, width-pad, y2)
	pts = append(pts[:0], fmt.Sprintf("%d,%d", pad, y2-plotH)) // the sale starts full
	left := int64(units)
	for i, s := range r.Timeline {
		left = max(0, left-s.Replies[ReplyOrder]*int64(qty))
		x := float64(pad) + step*(float64(i)+0.5)
		y := float64(y2) - float64(left)/float64(max(units, 1))*float64(plotH)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#2e7d32" stroke-width="2" points="%s"/>`+"\n", strings.Join(pts, " "))
	yTicks(&b, pad, y2, plotH, func(f float64) string { return fmt.Sprintf("%.0f", f*float64(units)) })
	xTicks(&b, pad, y2, step, n)
	for i, k := range order {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			pad+i*100, height-18, colors[k], pad+i*100+14, height-9, html.EscapeString(k))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// yTicks draws a plot's y axis at x, from y (its bottom) up plotH, with ticks at 0, 1/2 and 1
// of the scale, labelled by label(fraction).
func yTicks(b *strings.Builder, x, y, plotH int, label func(float64) string) {
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>`+"\n", x, y, x, y-plotH)
	for _, f := range []float64{0, 0.5, 1} {
		ty := float64(y) - f*float64(plotH)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#444"/><text x="%d" y="%.1f" text-anchor="end" font-size="10" class="ytick">%s</text>`+"\n",
			x-4, ty, x, ty, x-6, ty+3, html.EscapeString(label(f)))
	}
}

// xTicks draws ticks under a plot's x axis at y: five, labelled with the time in seconds at
// the end of their sample.
func xTicks(b *strings.Builder, x, y int, step float64, n int) {
	for i := 0; i < 5; i++ {
		s := (n - 1) * i / 4
		tx := float64(x) + step*(float64(s)+0.5)
		at := sampleEvery * time.Duration(s+1)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#444"/><text x="%.1f" y="%d" text-anchor="middle" font-size="10" class="xtick">%.1f s</text>`+"\n",
			tx, y, tx, y+4, tx, y+14, at.Seconds())
	}
}
