package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill-proxy/internal/testenv"
)

// chromium finds Debian's headless browser, which the dev stack installs.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if testenv.Required() {
		t.Fatal("chromium not found: scripts/devstack.sh up installs it (Debian's chromium package)")
	}
	t.Skip("chromium not found")
	return ""
}

// browse loads url in headless Chromium, lets its scripts run for a few seconds of virtual
// time, and returns the page's DOM; with shot, it also writes a screenshot there.
func browse(t *testing.T, bin, url, shot string) string {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000", "--window-size=1500,900"}
	if shot != "" {
		args = append(args, "--screenshot="+shot)
	} else {
		args = append(args, "--dump-dom")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, errOut.String())
	}
	return out.String()
}

// TestSalePage opens the live sale page in headless Chromium during a sale, takes a
// screenshot, and once the sale is over checks that the page shows the figures the proxy
// reports in SECKILL.INFO: stock, orders, sold-out answers and duplicates.
func TestSalePage(t *testing.T) {
	bin := chromium(t)
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg) // the delay from buy to stored is the sink's
	s.runSampler(t, 200*time.Millisecond)
	admin := httptest.NewServer(s.admin)
	t.Cleanup(admin.Close)
	ctx := context.Background()
	c := s.client(t, 8)
	sku := newSKU("page")
	const units = 1500
	s.sale(t, c, sku, units)

	// The sale: 8 buyers' loops, each a new uid every time but a repeat of the one before
	// every tenth, paced so that the sale lasts a few seconds.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				n := i
				if i%10 == 9 {
					n--
				}
				uid := fmt.Sprintf("u%d-%d", w, n)
				_ = c.Do(ctx, "seckill.buy", sku, uid).Err()
			}
		})
	}
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})

	shot := filepath.Join(t.TempDir(), "sale.png")
	if dir := os.Getenv("SALE_PAGE_SCREENSHOT_DIR"); dir != "" {
		shot = filepath.Join(dir, "sale.png") // to look at it
	}
	browse(t, bin, admin.URL+"/sale", shot)
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) || len(png) < 10_000 {
		t.Fatalf("the screenshot is not a PNG of a page (%d bytes)", len(png))
	}

	// The sale ends: sold out, and buyers told so (the loops stop only once one was: stopping
	// them the moment the stock reached 0 could leave no SOLDOUT answer at all).
	eventually(t, 60*time.Second, "the sale to sell out", func() bool {
		return infoField(t, c, sku, "remaining_stock") == 0 && infoField(t, c, sku, "local_soldout") > 0
	})
	close(stop)
	wg.Wait()
	want := map[string]int64{
		"stock":     infoField(t, c, sku, "remaining_stock"),
		"order":     infoField(t, c, sku, "local_successes"),
		"soldout":   infoField(t, c, sku, "local_soldout"),
		"duplicate": infoField(t, c, sku, "local_duplicates"),
	}
	if want["order"] != units || want["soldout"] == 0 || want["duplicate"] == 0 {
		t.Fatalf("the sale did not go as planned: %v", want)
	}
	// The sampler's next sample has the final figures.
	eventually(t, 10*time.Second, "a sample after the sale", func() bool {
		resp, err := http.Get(admin.URL + "/sale.json")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var data struct {
			Samples []struct {
				Sales map[string]struct {
					Buys map[string]int64 `json:"buys"`
				} `json:"sales"`
			} `json:"samples"`
		}
		if json.NewDecoder(resp.Body).Decode(&data) != nil || len(data.Samples) == 0 {
			return false
		}
		b := data.Samples[len(data.Samples)-1].Sales[sku].Buys
		return b["soldout"] == want["soldout"] && b["duplicate"] == want["duplicate"]
	})

	dom := browse(t, bin, admin.URL+"/sale", "")
	row := regexp.MustCompile(`<tr data-sku="` + regexp.QuoteMeta(sku) + `">(.*?)</tr>`).FindStringSubmatch(dom)
	if row == nil {
		t.Fatalf("the page has no row for %s:\n%s", sku, dom)
	}
	for field, n := range want {
		m := regexp.MustCompile(`<td class="` + field + `">(-?\d+)</td>`).FindStringSubmatch(row[1])
		if m == nil {
			t.Errorf("the row has no %s: %s", field, row[1])
			continue
		}
		if got, _ := strconv.ParseInt(m[1], 10, 64); got != n {
			t.Errorf("the page shows %s %d, the proxy reports %d", field, got, n)
		}
	}
	if !regexp.MustCompile(`<td class="stored">\d+ \(max \d+\)</td>`).MatchString(row[1]) {
		t.Errorf("the row shows no delay from buy to stored: %s", row[1])
	}
	for _, id := range []string{"chart-stock", "chart-rate", "chart-latency", "chart-stored"} {
		if !regexp.MustCompile(`<svg id="` + id + `"[^>]*>.*?<polyline`).MatchString(dom) {
			t.Errorf("chart %s has no line", id)
		}
	}
}

// saleJSON reads the sampler's samples as the page does.
func saleJSON(t *testing.T, url string) []map[string]any {
	t.Helper()
	resp, err := http.Get(url + "/sale.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var data struct {
		Samples []map[string]any `json:"samples"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&data); err != nil {
		t.Fatal(err)
	}
	return data.Samples
}

// legendColor is the colour the page's DOM gives series name in the legend of chart id.
func legendColor(t *testing.T, dom, id, name string) color.RGBA {
	t.Helper()
	legend := regexp.MustCompile(`(?s)<div class="legend" id="legend-` + id + `">(.*?)</div>`).FindStringSubmatch(dom)
	if legend == nil {
		t.Fatalf("no legend for %s", id)
	}
	m := regexp.MustCompile(`<span data-series="` + regexp.QuoteMeta(name) + `"><i style="background: rgb\((\d+), (\d+), (\d+)\);?"></i>`).FindStringSubmatch(legend[1])
	if m == nil {
		t.Fatalf("legend %s has no colour for %s: %s", id, name, legend[1])
	}
	var c [3]uint8
	for i := range c {
		n, _ := strconv.Atoi(m[i+1])
		c[i] = uint8(n)
	}
	return color.RGBA{c[0], c[1], c[2], 255}
}

// rowsOfColor counts the rows of the screenshot, left of x, with a pixel within 40 of c in
// every channel: how tall a line of that colour is drawn (its legend's swatch adds a dozen).
func rowsOfColor(img image.Image, c color.RGBA, x int) int {
	near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d > -40 && d < 40 }
	rows := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for px := b.Min.X; px < min(x, b.Max.X); px++ {
			r, g, bl, _ := img.At(px, y).RGBA()
			if near(r, c.R) && near(g, c.G) && near(bl, c.B) {
				rows++
				break
			}
		}
	}
	return rows
}

// TestSalePageScalesToEachSale: a sale of 3,000 units next to one of 1,000,000, each half
// and a thousandth sold. The stock chart shows each as a share of its own initial stock, so in
// the screenshot the small sale's line falls across half the chart's height; on one axis of
// units it would lie flat on the floor, as the big one's lies flat at the top.
func TestSalePageScalesToEachSale(t *testing.T) {
	bin := chromium(t)
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	s.runSampler(t, 100*time.Millisecond)
	admin := httptest.NewServer(s.admin)
	t.Cleanup(admin.Close)
	ctx := context.Background()
	c := s.client(t, 8)
	small, big := newSKU("page_a_small"), newSKU("page_b_big")
	s.sale(t, c, small, 3000)
	s.sale(t, c, big, 1_000_000, "BUCKETS", 3)
	next := 0 // every buy a new buyer
	buy := func(sku string, n int) {
		p := c.Pipeline()
		for range n {
			next++
			p.Do(ctx, "seckill.buy", sku, fmt.Sprintf("u%d", next))
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatalf("buys of %s: %v", sku, err)
		}
	}
	buy(big, 10) // both sales served here before the sampler's first look at them
	buy(small, 10)
	eventually(t, 10*time.Second, "samples of both sales at full stock", func() bool {
		n := 0
		for _, smp := range saleJSON(t, admin.URL) {
			sales, _ := smp["sales"].(map[string]any)
			if sales[small] != nil && sales[big] != nil {
				n++
			}
		}
		return n >= 3
	})
	for range 30 {
		buy(small, 50)
		buy(big, 35)
		time.Sleep(20 * time.Millisecond) // a pace for the chart to draw, not a wait on a condition
	}
	eventually(t, 10*time.Second, "a sample with half the small sale sold", func() bool {
		smp := saleJSON(t, admin.URL)
		if len(smp) == 0 {
			return false
		}
		last, _ := smp[len(smp)-1]["sales"].(map[string]any)
		st, _ := last[small].(map[string]any)
		return st != nil && st["stock"] == float64(1490)
	})
	shot := filepath.Join(t.TempDir(), "scales.png")
	if dir := os.Getenv("SALE_PAGE_SCREENSHOT_DIR"); dir != "" {
		shot = filepath.Join(dir, "scales.png")
	}
	browse(t, bin, admin.URL+"/sale", shot)
	dom := browse(t, bin, admin.URL+"/sale", "")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot: %v", err)
	}
	// The stock chart is the first figure: its column ends before x 500.
	smallRows, bigRows := rowsOfColor(img, legendColor(t, dom, "stock", small), 500), rowsOfColor(img, legendColor(t, dom, "stock", big), 500)
	if smallRows < 60 || bigRows > 40 {
		t.Errorf("in the stock chart the small sale's line spans %d rows and the big one's %d; want the small one's across half the chart (60 or more) and the big one's flat", smallRows, bigRows)
	}
	for _, want := range []string{`<td class="share">49.7%</td>`, `<td class="state">open</td>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}

// TestSalePageFoldsOthers renders the page on fixed samples: a sale served here, being
// stored, next to another proxy's stale sale with late orders and a batch stored long ago.
// The stale one goes under the folded line, out of the charts; the served one's time to drain
// follows its pending orders' pace.
func TestSalePageFoldsOthers(t *testing.T) {
	bin := chromium(t)
	page, err := os.ReadFile("salepage.html")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	var samples []map[string]any
	for i := range 6 {
		at := now - int64(5-i)*1000
		samples = append(samples, map[string]any{"t": at, "p50_ms": 1, "p99_ms": 5, "sales": map[string]any{
			"live": map[string]any{"state": "sold out", "served": true, "stock": 0, "initial": 30000, "pending": 1000 - 100*i, "outbox": 0,
				"buys": map[string]int64{"order": 30000}, "stored_ms": 22, "stored_max_ms": 40, "stored_at": at},
			"stale": map[string]any{"state": "open", "served": false, "stock": 10, "initial": 1000000, "pending": 7, "late": 7, "outbox": 7,
				"buys": map[string]int64{}, "stored_ms": 159667, "stored_max_ms": 159667, "stored_at": now - 3_600_000},
		}})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/sale", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(page) })
	mux.HandleFunc("/sale.json", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"interval_ms": 1000, "samples": samples})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	dom := browse(t, bin, srv.URL+"/sale", "")
	main := regexp.MustCompile(`(?s)<table id="sales">.*?</table>`).FindString(dom)
	others := regexp.MustCompile(`(?s)<details id="others">.*?</details>`).FindString(dom)
	switch {
	case !strings.Contains(main, `data-sku="live"`) || strings.Contains(main, `data-sku="stale"`):
		t.Errorf("the sales table should hold the live sale alone: %s", main)
	case !strings.Contains(others, `data-sku="stale"`) || !strings.Contains(others, "other open sales: 1 (stale)"):
		t.Errorf("the stale sale is not under the folded line: %s", others)
	case !strings.Contains(main, `<td class="drain">5.0 s</td>`) || !strings.Contains(main, `<td class="state">sold out</td>`):
		t.Errorf("the live sale's row: want sold out, 500 pending draining at 100/s: %s", main)
	case strings.Contains(dom, `data-series="stale"`):
		t.Error("a chart draws the stale sale")
	}
	// The stored chart's top tick is scaled to the live sale's 22 ms, not the stale 159,667.
	stored := regexp.MustCompile(`(?s)<svg id="chart-stored".*?</svg>`).FindString(dom)
	if !strings.Contains(stored, ">22.0<") || strings.Contains(stored, "159667") {
		t.Errorf("the stored chart is not scaled to the live sale: %s", stored)
	}
}
