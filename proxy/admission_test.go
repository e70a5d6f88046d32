package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/internal/loadtest"
	"seckill-proxy/sale"
)

// flood buys sku through c from conns connections, each pipelining 16 buys by new buyers,
// until ctx ends; it counts the replies by kind.
func flood(ctx context.Context, t *testing.T, c *redis.Client, sku, prefix string, conns int, kinds *sync.Map) *sync.WaitGroup {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				p := c.Pipeline()
				cmds := make([]*redis.Cmd, 16)
				for i := range cmds {
					cmds[i] = p.Do(context.Background(), "seckill.buy", sku, prefix+strconv.FormatInt(next.Add(1), 10))
				}
				_, _ = p.Exec(context.Background())
				for _, cmd := range cmds {
					k := loadtest.Kind(cmd.Err())
					n, _ := kinds.LoadOrStore(k, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
					if k == loadtest.ReplyOther {
						t.Errorf("flood: %v", cmd.Err())
						return
					}
				}
			}
		})
	}
	return &wg
}

func count(kinds *sync.Map, k string) int64 {
	if n, ok := kinds.Load(k); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// infoField is field of SECKILL.INFO sku through c (sku "": the proxy's own INFO).
func infoField(t *testing.T, c *redis.Client, sku, field string) int64 {
	t.Helper()
	args := []any{"seckill.info"}
	if sku != "" {
		args = append(args, sku)
	}
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := v.(map[any]any) // RESP3; RESP2 is a flat array
	if a, ok := v.([]any); ok {
		m = map[any]any{}
		for i := 0; i+1 < len(a); i += 2 {
			m[a[i]] = a[i+1]
		}
	}
	if n, ok := m[field].(int64); ok {
		return n
	}
	t.Fatalf("SECKILL.INFO %s has no %s: %v", sku, field, m)
	return 0
}

// TestAdmissionSharedRate: three proxies share one sale's RATE 1000 BURST 100, each flooded
// by its own load for 5 s: the buys that reached the script (every one a new buyer, so every
// one sold) are 5,100 ± 10%, whatever each proxy's share. The rest were answered LIMITED rate
// and never touched Redis. Then SECKILL.LIMIT raises the rate mid-sale, and every proxy
// applies it within a second.
func TestAdmissionSharedRate(t *testing.T) {
	var stacks []*stack
	var clients []*redis.Client
	cfg := newConfig(t, nil) // one deployment: the proxies share their settings
	for range 3 {
		s := startProxy(t, cfg, false)
		stacks = append(stacks, s)
		clients = append(clients, s.client(t, 4))
	}
	sku := newSKU("rate")
	stacks[0].sale(t, clients[0], sku, 1_000_000, "RATE", 1000, "BURST", 100)
	ctx := context.Background()
	buyers := func() int64 { return stacks[0].rc.HLen(ctx, sale.KeysFor(sku).Buyers).Val() }

	var kinds [3]sync.Map
	fctx, stop := context.WithCancel(ctx)
	var floods []*sync.WaitGroup
	begin := time.Now()
	for i, c := range clients {
		floods = append(floods, flood(fctx, t, c, sku, fmt.Sprintf("p%d-", i), 4, &kinds[i]))
	}
	time.Sleep(5 * time.Second) // the load's length, not a synchronisation
	stop()
	for _, wg := range floods {
		wg.Wait()
	}
	elapsed := time.Since(begin)
	sold := buyers()
	want := 100 + 1000*elapsed.Seconds()
	var limited, orders int64
	for i := range kinds {
		limited += count(&kinds[i], loadtest.ReplyLimited)
		orders += count(&kinds[i], loadtest.ReplyOrder)
		t.Logf("proxy %d: %d orders, %d LIMITED", i, count(&kinds[i], loadtest.ReplyOrder), count(&kinds[i], loadtest.ReplyLimited))
	}
	t.Logf("%d buys reached the script in %v (want %.0f ± 10%%), %d LIMITED", sold, elapsed, want, limited)
	if float64(sold) < 0.9*want || float64(sold) > 1.1*want {
		t.Errorf("%d buys reached the script in %v; want %.0f ± 10%%", sold, elapsed, want)
	}
	if orders != sold {
		t.Errorf("%d buyers told of an order, %d buyers in Redis", orders, sold)
	}
	if limited < sold {
		t.Errorf("only %d buys were LIMITED: the flood did not outrun the rate", limited)
	}

	// Raise the rate: every proxy applies it within a second.
	if err := clients[1].Do(ctx, "seckill.limit", sku, "RATE", 2000, "BURST", 200).Err(); err != nil {
		t.Fatalf("SECKILL.LIMIT: %v", err)
	}
	changed := time.Now()
	for i, c := range clients {
		eventually(t, time.Second-time.Since(changed), fmt.Sprintf("proxy %d applies the new rate", i), func() bool {
			return infoField(t, c, sku, "local_rate") == 2000
		})
	}
	// And the sale takes 2,000 a second from then on.
	fctx, stop = context.WithCancel(ctx)
	floods = floods[:0]
	before := buyers()
	begin = time.Now()
	for i, c := range clients {
		floods = append(floods, flood(fctx, t, c, sku, fmt.Sprintf("q%d-", i), 4, &kinds[i]))
	}
	time.Sleep(2 * time.Second)
	stop()
	for _, wg := range floods {
		wg.Wait()
	}
	got, want := buyers()-before, 200+2000*time.Since(begin).Seconds()
	t.Logf("after LIMIT RATE 2000: %d buys reached the script (want %.0f ± 15%%)", got, want)
	if float64(got) < 0.85*want || float64(got) > 1.15*want {
		t.Errorf("after LIMIT RATE 2000: %d buys reached the script; want %.0f ± 15%%", got, want)
	}

	// RATE OFF lifts it on every proxy.
	if err := clients[2].Do(ctx, "seckill.limit", sku, "RATE", "OFF").Err(); err != nil {
		t.Fatalf("SECKILL.LIMIT RATE OFF: %v", err)
	}
	for i, c := range clients {
		eventually(t, 2*time.Second, fmt.Sprintf("proxy %d lifts the rate", i), func() bool {
			return infoField(t, c, sku, "local_rate") == 0
		})
	}
}

// TestAdmissionDenyAndBuyer: SECKILL.DENY reaches every proxy within a second, and the
// denied buyer is answered LIMITED denied with no Redis call; ALLOW undoes it. A buyer over
// admission.buyer_attempts is answered LIMITED buyer; a buyer this proxy sold to is answered
// DUPLICATE without Redis. The deny list's keys are out of the pass-through's reach.
func TestAdmissionDenyAndBuyer(t *testing.T) {
	mutate := func(c *conf.Config) {
		c.Admission.BuyerAttempts = 3
		c.Admission.BuyerWindow = time.Minute
	}
	var stacks []*stack
	var clients []*redis.Client
	cfg := newConfig(t, mutate)
	for range 3 {
		s := startProxy(t, cfg, false)
		stacks = append(stacks, s)
		clients = append(clients, s.client(t, 1))
	}
	ctx := context.Background()
	sku := newSKU("deny")
	stacks[0].sale(t, clients[0], sku, 10)
	uid := "bad-" + sku
	t.Cleanup(func() { _ = clients[0].Do(context.Background(), "seckill.allow", uid).Err() })

	if err := clients[0].Do(ctx, "seckill.deny", uid, "TTL", 60).Err(); err != nil {
		t.Fatalf("SECKILL.DENY: %v", err)
	}
	denied := time.Now()
	for i, c := range clients {
		eventually(t, time.Second-time.Since(denied), fmt.Sprintf("proxy %d refuses the denied uid", i), func() bool {
			err := c.Do(ctx, "seckill.buy", sku, uid).Err()
			return err != nil && strings.HasPrefix(err.Error(), "LIMITED denied ")
		})
	}
	err := clients[1].Do(ctx, "seckill.buy", sku, uid).Err()
	ms, _ := strconv.Atoi(strings.TrimPrefix(fmt.Sprint(err), "LIMITED denied "))
	if ms <= 58_000 || ms > 60_000 {
		t.Errorf("denied for 60 s: %v, want a retry-after near 60000 ms", err)
	}
	before := stacks[1].g.Stats()
	if err := clients[1].Do(ctx, "seckill.buy", sku, uid).Err(); err == nil || !strings.HasPrefix(err.Error(), "LIMITED denied") {
		t.Fatalf("denied buyer: %v", err)
	}
	if after := stacks[1].g.Stats(); after.Scripts != before.Scripts || after.LimitedDenied != before.LimitedDenied+1 {
		t.Errorf("a denied buy: scripts %d -> %d, limited_denied %d -> %d; want no script, one more denied",
			before.Scripts, after.Scripts, before.LimitedDenied, after.LimitedDenied)
	}
	if err := clients[2].Do(ctx, "seckill.allow", uid).Err(); err != nil {
		t.Fatalf("SECKILL.ALLOW: %v", err)
	}
	allowed := time.Now()
	for i, c := range clients {
		eventually(t, time.Second-time.Since(allowed), fmt.Sprintf("proxy %d lets the allowed uid buy", i), func() bool {
			err := c.Do(ctx, "seckill.buy", sku, uid).Err()
			var dup string
			if err != nil {
				dup = err.Error()
			}
			return err == nil || strings.HasPrefix(dup, "DUPLICATE ")
		})
	}
	if got, err := clients[0].Do(ctx, "seckill.allow", uid).Int(); err != nil || got != 0 {
		t.Errorf("ALLOW of a uid not denied = %d, %v; want 0", got, err)
	}
	if err := clients[0].Do(ctx, "seckill.deny", "forever-"+sku).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clients[0].Do(context.Background(), "seckill.allow", "forever-"+sku).Err() })
	eventually(t, time.Second, "a deny with no TTL", func() bool {
		return fmt.Sprint(clients[0].Do(ctx, "seckill.buy", sku, "forever-"+sku).Err()) == "LIMITED denied -1"
	})

	// Per-buyer attempts: the buyer who bought above has made 1-3 attempts on each proxy; on a
	// fresh buyer, the 4th attempt on one proxy within the window is refused.
	c := clients[0]
	g := stacks[0].g
	first, err := c.Do(ctx, "seckill.buy", sku, "eager").Text()
	if err != nil {
		t.Fatal(err)
	}
	scripts := g.Stats().Scripts
	for i := range 2 {
		err := c.Do(ctx, "seckill.buy", sku, "eager").Err()
		if err == nil || err.Error() != "DUPLICATE "+first {
			t.Fatalf("attempt %d: %v, want DUPLICATE %s", i+2, err, first)
		}
	}
	if got := g.Stats().Scripts; got != scripts {
		t.Errorf("a buyer this proxy sold to went to Redis: %d scripts, was %d", got, scripts)
	}
	err = c.Do(ctx, "seckill.buy", sku, "eager").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "LIMITED buyer ") {
		t.Fatalf("4th attempt: %v, want LIMITED buyer", err)
	}
	if got := infoField(t, c, sku, "local_limited_buyer"); got < 1 {
		t.Errorf("SECKILL.INFO local_limited_buyer = %d", got)
	}
	if err := c.Do(ctx, "seckill.buy", sku, "eager-2").Err(); err != nil {
		t.Errorf("another buyer: %v", err)
	}

	// The pass-through may not write the deny list.
	for _, key := range []string{sale.DenyKey, sale.DenyVersionKey} {
		err := c.Do(ctx, "del", key).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("DEL %s through the proxy: %v, want NOPERM", key, err)
		}
	}
	for _, args := range [][]any{
		{"seckill.deny"}, {"seckill.deny", "u", "TTL"}, {"seckill.deny", "u u"}, {"seckill.deny", "u", "TTL", "-1"},
		{"seckill.allow", "u u"}, {"seckill.limit", sku, "RATE"}, {"seckill.limit", sku, "RATE", "x"},
	} {
		if err := c.Do(ctx, args...).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR ") {
			t.Errorf("%v: %v, want ERR", args, err)
		}
	}
	if err := c.Do(ctx, "seckill.limit", newSKU("nosale"), "RATE", 5).Err(); err == nil || !strings.HasPrefix(err.Error(), "CLOSED") {
		t.Errorf("LIMIT of a SKU with no sale: %v, want CLOSED", err)
	}
}

// TestAdmissionSaleLosesNothing: a sale with a rate and per-buyer limits on, buyers retrying
// after LIMITED as the retry-after says: exactly as many confirmed orders as successes told,
// and CHECK agrees with MySQL.
func TestAdmissionSaleLosesNothing(t *testing.T) {
	const units, buyers, conns = 2000, 20000, 50
	cfg := newConfig(t, func(c *conf.Config) {
		c.Admission.BuyerAttempts = 2
		c.Admission.BuyerWindow = 200 * time.Millisecond
	})
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, conns)
	sku := newSKU("ratesale")
	s.sale(t, c, sku, units, "RATE", 3000, "BURST", 300)
	ctx := context.Background()
	var orders, soldOut, limited atomic.Int64
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			for i := w; i < buyers; i += conns {
				uid := "u" + strconv.Itoa(i)
				for {
					_, err := c.Do(ctx, "seckill.buy", sku, uid).Text()
					switch loadtest.Kind(err) {
					case loadtest.ReplyOrder:
						orders.Add(1)
					case loadtest.ReplySoldOut:
						soldOut.Add(1)
					case loadtest.ReplyLimited:
						limited.Add(1)
						f := strings.Fields(err.Error())
						ms, _ := strconv.Atoi(f[len(f)-1])
						time.Sleep(time.Duration(ms) * time.Millisecond) // as a client obeys retry-after
						continue
					default:
						t.Errorf("buyer %s: %v", uid, err)
					}
					break
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d orders, %d SOLDOUT, %d LIMITED on the way", orders.Load(), soldOut.Load(), limited.Load())
	if orders.Load() != units || soldOut.Load() != buyers-units {
		t.Fatalf("%d orders and %d SOLDOUT; want %d and %d", orders.Load(), soldOut.Load(), units, buyers-units)
	}
	if limited.Load() == 0 {
		t.Error("no buy was LIMITED: the rate was never reached")
	}
	s.waitConfirmed(t, sku, units, 60*time.Second)
	if st, stock := s.mysqlOrders(t, sku); len(st) != 1 || stock != 0 {
		t.Fatalf("MySQL orders %v, stock %d; want only %d confirmed and stock 0", st, stock, units)
	}
	waitCheckOK(t, c, sku, 30*time.Second)
	if err := c.Do(ctx, "seckill.buy", sku, "u1").Err(); err == nil || errors.Is(err, redis.Nil) {
		t.Errorf("a buy after the sale: %v", err)
	}
}

// TestOverLimitSpendsNoRate: buys of more units than the sale's per-user limit are refused
// before they spend a token of its RATE, so a flood of them takes nothing from other buyers
// (before, the victim got 10 orders and 263 LIMITED in 8 s beside such a flood): 200 of them
// are all answered that they are over the limit, none LIMITED, and a buyer of one unit is
// then served.
func TestOverLimitSpendsNoRate(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 4)
	ctx := context.Background()
	sku := newSKU("overlimit")
	s.sale(t, c, sku, 100, "LIMIT", 1, "RATE", 1, "BURST", 3)
	over := 0
	for i := range 200 {
		err := c.Do(ctx, "seckill.buy", sku, fmt.Sprintf("greedy-%d", i), 2).Err()
		switch {
		case err != nil && strings.Contains(err.Error(), "above the per-user limit"):
			over++
		case code(err) == "LIMITED":
			t.Fatalf("over-limit buy %d was LIMITED: it spent a token of the sale's rate", i+1)
		default:
			t.Fatalf("over-limit buy %d: %v", i+1, err)
		}
	}
	eventually(t, 5*time.Second, "a buyer of one unit served after the flood", func() bool {
		return c.Do(ctx, "seckill.buy", sku, "fair").Err() == nil
	})
	if over != 200 {
		t.Fatalf("%d of 200 over-limit buys told so", over)
	}
}
