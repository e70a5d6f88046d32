package guard

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/sale"
)

// TestBuysOneScript runs one turn's buys of one SKU, which the engine sends as one call of
// buy.lua, and checks that every buy got the answer it would have got alone,
// in order: a duplicate of a buyer earlier in the same call, a quantity above the limit, a
// quantity above what is left, and a smaller one that still fits.
func TestBuysOneScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The count of script calls is the master's, server-wide: a script that another client
	// happens to run in the same few milliseconds adds to it. A batch that really takes more
	// than one call does so every time, so the sale is tried afresh, at most three times.
	var (
		sku  string
		rc   *redis.ClusterClient
		k    sale.Keys
		res  []BuyResult
		reqs []BuyRequest
	)
	calls := 0
	for attempt := 0; attempt < 3 && calls != 1; attempt++ {
		sku = "batch_" + strconv.FormatInt(time.Now().UnixNano(), 36)
		rc, k = openTestSale(t, sku, "7", 5, 3)
		master, err := rc.MasterForKey(ctx, k.Meta)
		if err != nil {
			t.Fatal(err)
		}
		if err := buyScript.Load(ctx, master).Err(); err != nil {
			t.Fatal(err)
		}
		cfg := conf.Default()
		g := New(rc, nil, zap.NewNop(), Options{Buy: cfg.Buy, MaxInflight: 100, Instance: "test"})
		t.Cleanup(g.Close)
		reqs = []BuyRequest{
			{SKU: sku, UID: "a", Qty: 2},
			{SKU: sku, UID: "b", Qty: 4}, // above the limit of 3
			{SKU: sku, UID: "a", Qty: 1}, // a bought earlier in this very call
			{SKU: sku, UID: "c", Qty: 3}, // 3 left: sold
			{SKU: sku, UID: "d", Qty: 1}, // 0 left
		}
		before := evalCalls(ctx, t, master)
		res = buyAll(ctx, t, g, reqs)
		calls = evalCalls(ctx, t, master) - before
	}
	if calls != 1 {
		t.Errorf("the batch took %d script calls, want 1", calls)
	}

	id := regexp.MustCompile(`^[0-9a-v]{20}$`)
	if res[0].Err != nil || !id.MatchString(res[0].OrderID) {
		t.Errorf("buy a: %+v, want an order id", res[0])
	}
	if !errors.Is(res[1].Err, ErrBadArgs) {
		t.Errorf("buy b (qty above the limit): %+v, want a bad-argument error", res[1])
	}
	var dup *DuplicateError
	if !errors.As(res[2].Err, &dup) || dup.OrderID != res[0].OrderID {
		t.Errorf("buy a again: %+v, want DUPLICATE %s", res[2], res[0].OrderID)
	}
	if res[3].Err != nil || !id.MatchString(res[3].OrderID) {
		t.Errorf("buy c: %+v, want an order id", res[3])
	}
	if !errors.Is(res[4].Err, ErrSoldOut) {
		t.Errorf("buy d: %+v, want SOLDOUT", res[4])
	}

	if stock, err := rc.Get(ctx, k.Stock).Int(); err != nil || stock != 0 {
		t.Errorf("stock = %d (%v), want 0", stock, err)
	}
	buyers, err := rc.HGetAll(ctx, k.Buyers).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": res[0].OrderID + ":2", "c": res[3].OrderID + ":3"}
	if len(buyers) != len(want) || buyers["a"] != want["a"] || buyers["c"] != want["c"] {
		t.Errorf("buyers = %v, want %v", buyers, want)
	}
	entries, err := rc.XRange(ctx, k.Outbox, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Values["order"] != res[0].OrderID || entries[1].Values["order"] != res[3].OrderID {
		t.Errorf("outbox = %v, want the orders of a and c, in that order", entries)
	}
}

// evalCalls is how many EVALSHA and EVAL calls master has served.
func evalCalls(ctx context.Context, t *testing.T, master *redis.Client) int {
	t.Helper()
	info, err := master.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile(`cmdstat_(?:evalsha|eval):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		c, _ := strconv.Atoi(m[1])
		n += c
	}
	return n
}

// TestUnknownSKUsLeaveNoTrace: buys of SKUs that were never warmed are answered CLOSED and
// make no per-SKU state, so made-up SKUs cannot grow the proxy's memory or its INFO list.
func TestUnknownSKUsLeaveNoTrace(t *testing.T) {
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.Redis(t), ClusterStateReloadInterval: time.Second})
	t.Cleanup(func() { _ = rc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g := New(rc, nil, zap.NewNop(), Options{Buy: conf.Default().Buy, MaxInflight: 1000, Instance: "test"})
	t.Cleanup(g.Close)

	reqs := make([]BuyRequest, 200)
	for i := range reqs {
		reqs[i] = BuyRequest{SKU: "nosuch_" + strconv.FormatInt(time.Now().UnixNano(), 36) + "_" + strconv.Itoa(i), UID: "u", Qty: 1}
	}
	for i, r := range buyAll(ctx, t, g, reqs) {
		if !errors.Is(r.Err, ErrClosed) || r.Err.Error() != "CLOSED not warmed" {
			t.Fatalf("buy %d: %v, want CLOSED not warmed", i, r.Err)
		}
	}
	for _, sku := range g.skus() { // real sales with a rate get counters from the sync
		if strings.HasPrefix(sku, "nosuch_") {
			t.Errorf("%s has counters after buys of SKUs with no sale", sku)
		}
	}
	if got := g.Stats().Closed; got != int64(len(reqs)) {
		t.Errorf("closed counter = %d, want %d", got, len(reqs))
	}
}

// openTestSale writes an open sale of sku straight into Redis (version, stock, per-user limit),
// removed when the test ends, and returns a cluster client and the sale's keys.
func openTestSale(t *testing.T, sku, version string, stock, limit int) (*redis.ClusterClient, sale.Keys) {
	t.Helper()
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.Redis(t), ClusterStateReloadInterval: time.Second})
	t.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	k := sale.KeysFor(sku)
	t.Cleanup(func() { rc.Del(context.Background(), k.Meta, k.Stock, k.Buyers, k.Outbox) })
	if err := rc.HSet(ctx, k.Meta, "state", "open", "version", version, "start", "0", "end", "0", "limit", limit).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Set(ctx, k.Stock, stock, 0).Err(); err != nil {
		t.Fatal(err)
	}
	return rc, k
}
