package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
