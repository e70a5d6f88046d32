package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/sale"
	"seckill-proxy/sink"
)

// TestSeedsSale replays the seeds' story: 2,000 units, 80,000 distinct buyers over 200
// connections. Exactly 2,000 buys succeed, with distinct order ids, and Redis holds exactly
// what was sold.
func TestSeedsSale(t *testing.T) {
	const units, buyers, conns = 2000, 80000, 200
	s := startProxy(t, newConfig(t, nil), false) // no tee: the outbox keeps every order
	c := s.client(t, conns)
	sku := newSKU("seeds")
	s.sale(t, c, sku, units)

	ctx := context.Background()
	var mu sync.Mutex
	ids := map[string]bool{}
	replies := map[string]int{}
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			local := map[string]int{}
			var got []string
			for i := w; i < buyers; i += conns {
				id, err := c.Do(ctx, "seckill.buy", sku, "u"+strconv.Itoa(i)).Text()
				if err == nil {
					got = append(got, id)
				}
				local[code(err)]++
			}
			mu.Lock()
			defer mu.Unlock()
			for k, n := range local {
				replies[k] += n
			}
			for _, id := range got {
				ids[id] = true
			}
		})
	}
	wg.Wait()

	if replies[""] != units || replies["SOLDOUT"] != buyers-units || len(replies) != 2 {
		t.Fatalf("replies %v, want %d successes and %d SOLDOUT", replies, units, buyers-units)
	}
	if len(ids) != units {
		t.Fatalf("%d distinct order ids, want %d", len(ids), units)
	}
	k := sale.KeysFor(sku)
	if stock, _ := s.rc.Get(ctx, k.Stock).Int(); stock != 0 {
		t.Errorf("stock key = %d, want 0", stock)
	}
	if n := s.rc.HLen(ctx, k.Buyers).Val(); n != units {
		t.Errorf("buyers hash holds %d, want %d", n, units)
	}
	if n := s.rc.XLen(ctx, k.Outbox).Val(); n != units {
		t.Errorf("outbox holds %d, want %d", n, units)
	}
	buyersMap := s.rc.HGetAll(ctx, k.Buyers).Val()
	for _, v := range buyersMap {
		if id, qty, _ := strings.Cut(v, ":"); !ids[id] || qty != "1" {
			t.Fatalf("buyers hash has order %s that no buyer was given", id)
		}
	}
}

func TestDuplicateBuyerGetsTheFirstOrder(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 2)
	sku := newSKU("dup")
	s.sale(t, c, sku, 5)
	ctx := context.Background()
	first, err := c.Do(ctx, "seckill.buy", sku, "alice").Text()
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(ctx, "SECKILL.BUY", sku, "alice").Text()
	if err == nil || err.Error() != "DUPLICATE "+first {
		t.Fatalf("second buy: %v, want DUPLICATE %s", err, first)
	}
	if stock, _ := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Int(); stock != 4 {
		t.Fatalf("stock = %d, want 4 (taken once)", stock)
	}
	st, err := c.Do(ctx, "seckill.status", sku, "alice").Text()
	if err != nil || st != "pending "+first {
		t.Fatalf("STATUS = %q, %v; want pending %s", st, err, first)
	}
	if st, _ := c.Do(ctx, "seckill.status", sku, "bob").Text(); st != "none" {
		t.Fatalf("STATUS of a non-buyer = %q, want none", st)
	}
}

func TestQtyAboveStock(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	sku := newSKU("qty")
	s.sale(t, c, sku, 2, "LIMIT", 5)
	ctx := context.Background()
	if err := c.Do(ctx, "seckill.buy", sku, "u1", 3).Err(); code(err) != "SOLDOUT" || err.Error() != "SOLDOUT "+sku {
		t.Fatalf("qty 3 on stock 2: %v, want SOLDOUT %s", err, sku)
	}
	if stock, _ := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Int(); stock != 2 {
		t.Fatalf("stock = %d, want 2", stock)
	}
	if err := c.Do(ctx, "seckill.buy", sku, "u2", 6).Err(); code(err) != "ERR" || !contains(err, "above the per-user limit 5") {
		t.Fatalf("qty above the limit: %v, want ERR", err)
	}
	// Stock is left, so no local flag: a smaller buy still goes through.
	if err := c.Do(ctx, "seckill.buy", sku, "u1", 2).Err(); err != nil {
		t.Fatalf("qty 2 on stock 2: %v", err)
	}
}

func TestEveryKeyOfASKUIsInOneSlot(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	for _, sku := range []string{"sku_1001", "a", "x.y:z-9"} {
		k := sale.KeysFor(sku)
		want := s.rc.ClusterKeySlot(ctx, k.Stock).Val()
		for _, key := range []string{k.Buyers, k.Meta, k.Outbox, k.Result} {
			if got, err := s.rc.ClusterKeySlot(ctx, key).Result(); err != nil || got != want {
				t.Errorf("CLUSTER KEYSLOT %s = %d (%v), want %d like %s", key, got, err, want, k.Stock)
			}
		}
	}
}

// TestSoldOutFlagSkipsRedis: after a sellout, 10,000 more buys make no script call, and the
// buyers who hold orders are told DUPLICATE with their order ids, with no script call either.
func TestSoldOutFlagSkipsRedis(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Buy.SoldOutReprobe = time.Minute })
	c := s.client(t, 8)
	sku := newSKU("flag")
	s.sale(t, c, sku, 3)
	ctx := context.Background()
	ids := make([]string, 3)
	for i := range ids {
		id, err := c.Do(ctx, "seckill.buy", sku, "u"+strconv.Itoa(i)).Text()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	// The flag stands once the sale's buyers are read, a moment after the sellout.
	eventually(t, 5*time.Second, "the sold-out flag", func() bool {
		flagged, _, _ := s.g.Flags().Get(sku, time.Now())
		return flagged
	})
	before := s.g.Stats()
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, 10000)
	for i := range cmds {
		cmds[i] = pipe.Do(ctx, "seckill.buy", sku, "late"+strconv.Itoa(i))
	}
	_, _ = pipe.Exec(ctx)
	for i, cmd := range cmds {
		if code(cmd.Err()) != "SOLDOUT" {
			t.Fatalf("late buy %d: %v, want SOLDOUT", i, cmd.Err())
		}
	}
	after := s.g.Stats()
	if after.Scripts != before.Scripts {
		t.Fatalf("%d script calls after the sellout, want 0", after.Scripts-before.Scripts)
	}
	if got := after.LocalSoldOut - before.LocalSoldOut; got != 10000 {
		t.Fatalf("local sold-out answers = %d, want 10000", got)
	}
	// A buyer who holds an order is told so, from the flag too.
	for i, id := range ids {
		if err := c.Do(ctx, "seckill.buy", sku, "u"+strconv.Itoa(i)).Err(); err == nil || err.Error() != "DUPLICATE "+id {
			t.Fatalf("buyer u%d again: %v, want DUPLICATE %s", i, err, id)
		}
	}
	if scripts := s.g.Stats().Scripts; scripts != before.Scripts {
		t.Fatalf("%d script calls for the buyers' retries, want 0", scripts-before.Scripts)
	}
}

// TestSoldOutFlagClearedByWarm: a re-warm clears the flag at once.
func TestSoldOutFlagClearedByWarm(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Buy.SoldOutReprobe = time.Hour })
	c := s.client(t, 1)
	sku := newSKU("rewarm")
	s.sale(t, c, sku, 1)
	ctx := context.Background()
	if err := c.Do(ctx, "seckill.buy", sku, "u1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "seckill.buy", sku, "u2").Err(); code(err) != "SOLDOUT" {
		t.Fatalf("after the sellout: %v", err)
	}
	// The back office adds stock. u1's order is still on its way to MySQL (no sink runs): the
	// re-warm counts it in flight, 5 - 1.
	if _, err := s.db.Exec(`UPDATE seckill_items SET stock = 5 WHERE sku = ?`, sku); err != nil {
		t.Fatal(err)
	}
	if reply, err := c.Do(ctx, "seckill.warm", sku, "FORCE").Result(); err != nil || warmed(t, reply) != "stock 4 in_flight 1" {
		t.Fatalf("WARM FORCE = %v, %v", reply, err)
	}
	if err := c.Do(ctx, "seckill.buy", sku, "u2").Err(); err != nil {
		t.Fatalf("after the re-warm: %v, want an order", err)
	}
	if err := c.Do(ctx, "seckill.buy", sku, "u1").Err(); code(err) != "DUPLICATE" {
		t.Fatalf("a forced re-warm keeps the buyers: %v, want DUPLICATE", err)
	}
}

func TestWarm(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	ctx := context.Background()
	now := time.Now().UnixMilli()

	sku := newSKU("warm")
	if err := c.Do(ctx, "seckill.buy", sku, "u1").Err(); err == nil || err.Error() != "CLOSED not warmed" {
		t.Fatalf("buy before warm: %v", err)
	}
	if err := c.Do(ctx, "seckill.warm", sku).Err(); code(err) != "ERR" {
		t.Fatalf("warm of an unknown item: %v, want ERR", err)
	}
	s.item(t, sku, 10)
	if err := c.Do(ctx, "seckill.warm", sku, "END", 1).Err(); err == nil || !strings.Contains(err.Error(), "END 1 is not after Redis's clock") {
		t.Fatalf("WARM END 1: %v, want a refusal", err)
	}
	reply, err := c.Do(ctx, "seckill.warm", sku, "LIMIT", 2).Result()
	if m := infoMap(t, reply); err != nil || m["sku"] != sku || m["version"] != "2" || warmed(t, reply) != "stock 10 in_flight 0" {
		t.Fatalf("WARM = %v, %v", reply, err)
	}
	var status string
	var version int
	if err := s.db.QueryRow(`SELECT status, sale_version FROM seckill_items WHERE sku = ?`, sku).Scan(&status, &version); err != nil || status != "open" || version != 2 {
		t.Fatalf("MySQL item: %s v%d %v, want open v2 (the refused warm took v1)", status, version, err)
	}
	if err := c.Do(ctx, "seckill.warm", sku).Err(); code(err) != "ERR" {
		t.Fatalf("re-warm without FORCE: %v, want ERR", err)
	}
	// FORCE takes MySQL's stock, even if Redis was pushed above it by hand.
	if err := s.rc.Set(ctx, sale.KeysFor(sku).Stock, 2050, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if reply, err := c.Do(ctx, "seckill.warm", sku, "FORCE").Result(); err != nil || warmed(t, reply) != "stock 10 in_flight 0" || infoMap(t, reply)["version"] != "3" {
		t.Fatalf("WARM FORCE = %v, %v", reply, err)
	}
	if got, _ := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Int(); got != 10 {
		t.Fatalf("stock after FORCE = %d, want MySQL's 10", got)
	}

	later := newSKU("later")
	s.sale(t, c, later, 5, "START", now+3_600_000)
	if err := c.Do(ctx, "seckill.buy", later, "u1").Err(); err == nil || err.Error() != "CLOSED not started" {
		t.Fatalf("buy before START: %v", err)
	}
	ended := newSKU("ended")
	s.sale(t, c, ended, 1000, "START", 1, "END", time.Now().UnixMilli()+300)
	// Buys are served until END, then answered CLOSED ended.
	tries := 0
	eventually(t, 5*time.Second, "the sale ends", func() bool {
		tries++
		err := c.Do(ctx, "seckill.buy", ended, "u"+strconv.Itoa(tries)).Err()
		return err != nil && err.Error() == "CLOSED ended"
	})
	if err := c.Do(ctx, "seckill.warm", sku, "LIMIT", "x").Err(); code(err) != "ERR" {
		t.Fatalf("bad LIMIT: %v", err)
	}
}

// TestWarmCountsOrdersInFlight: units sold in Redis and not yet in MySQL (they wait in Kafka:
// no sink runs yet) are sold again neither by a forced re-warm mid-sale nor by a new sale
// warmed right after the last; once the sink has them, the stores agree.
func TestWarmCountsOrdersInFlight(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("inflight")
	s.sale(t, c, sku, 10)
	for _, uid := range []string{"u1", "u2", "u3"} {
		if err := c.Do(ctx, "seckill.buy", sku, uid).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if reply, err := c.Do(ctx, "seckill.warm", sku, "FORCE").Result(); err != nil || warmed(t, reply) != "stock 7 in_flight 3" {
		t.Fatalf("WARM FORCE mid-sale = %v, %v; want stock 7 with 3 in flight", reply, err)
	}
	if err := c.Do(ctx, "seckill.close", sku).Err(); err != nil {
		t.Fatal(err)
	}
	if reply, err := c.Do(ctx, "seckill.warm", sku).Result(); err != nil || warmed(t, reply) != "stock 7 in_flight 3" {
		t.Fatalf("WARM of a new sale = %v, %v; want stock 7 with 3 in flight", reply, err)
	}
	for _, uid := range []string{"u1", "u4"} { // a new sale: u1 may buy again
		if err := c.Do(ctx, "seckill.buy", sku, uid).Err(); err != nil {
			t.Fatalf("%s in the new sale: %v", uid, err)
		}
	}
	runSink(t, s.cfg)
	s.waitConfirmed(t, sku, 5, 30*time.Second)
	orders, mysqlStock := s.mysqlOrders(t, sku)
	if left := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Val(); orders[sink.StatusRejected] != 0 || mysqlStock != 5 || left != "5" {
		t.Fatalf("after the drain: %v, MySQL stock %d, Redis stock %s; want 5 confirmed, none rejected, 5 and 5", orders, mysqlStock, left)
	}
	waitCheckOK(t, c, sku, 10*time.Second)
}

func TestBadArgumentsOverTheWire(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	ctx := context.Background()
	tests := []struct {
		args []any
		want string
	}{
		{[]any{"seckill.buy", "sku 1", "u"}, `ERR sku must be 1-64 characters of [A-Za-z0-9_.:-], got "sku 1"`},
		{[]any{"seckill.buy", "sku", "u*"}, `ERR uid must be 1-64 characters of [A-Za-z0-9_.:-], got "u*"`},
		{[]any{"seckill.buy", "sku", "u", "0"}, `ERR qty must be an integer from 1 to the per-user limit, got "0"`},
		{[]any{"seckill.buy", "sku", "u", "two"}, `ERR qty must be an integer from 1 to the per-user limit, got "two"`},
		{[]any{"seckill.buy", "sku"}, `ERR wrong number of arguments for 'seckill.buy' command`},
	}
	for _, tt := range tests {
		if err := c.Do(ctx, tt.args...).Err(); err == nil || err.Error() != tt.want {
			t.Errorf("%v: %v, want %s", tt.args, err, tt.want)
		}
	}
}

// TestPipelineRepliesInOrder mixes buys and other commands in one pipeline.
func TestPipelineRepliesInOrder(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	sku := newSKU("pipe")
	s.sale(t, c, sku, 2)
	ctx := context.Background()
	pipe := c.Pipeline()
	b1 := pipe.Do(ctx, "seckill.buy", sku, "u1")
	e1 := pipe.Echo(ctx, "between")
	b2 := pipe.Do(ctx, "seckill.buy", sku, "u1")
	b3 := pipe.Do(ctx, "seckill.buy", sku, "bad uid")
	b4 := pipe.Do(ctx, "seckill.buy", sku, "u2")
	b5 := pipe.Do(ctx, "seckill.buy", sku, "u3")
	p := pipe.Ping(ctx)
	_, _ = pipe.Exec(ctx)
	id1, err := b1.Text()
	if err != nil {
		t.Fatal(err)
	}
	if e1.Val() != "between" || p.Val() != "PONG" {
		t.Fatalf("echo %q ping %q", e1.Val(), p.Val())
	}
	if b2.Err() == nil || b2.Err().Error() != "DUPLICATE "+id1 {
		t.Fatalf("b2: %v", b2.Err())
	}
	if code(b3.Err()) != "ERR" || b4.Err() != nil || code(b5.Err()) != "SOLDOUT" {
		t.Fatalf("b3 %v b4 %v b5 %v", b3.Err(), b4.Err(), b5.Err())
	}
}

// TestOrdinaryClientConnects uses go-redis with its defaults (it asks for RESP3 first).
func TestOrdinaryClientConnects(t *testing.T) {
	s := start(t, nil)
	c := redis.NewClient(&redis.Options{Addr: s.addr, ClientName: "legacy-app"})
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if name, err := c.ClientGetName(ctx).Result(); err != nil || name != "legacy-app" {
		t.Fatalf("CLIENT GETNAME = %q, %v", name, err)
	}
	if err := c.Do(ctx, "select", 1).Err(); err == nil {
		t.Fatal("SELECT 1 was accepted")
	}
}

func TestAuthRequired(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Password = "pw-" + newSKU("x") })
	ctx := context.Background()
	anon := s.client(t, 1)
	if err := anon.Ping(ctx).Err(); code(err) != "NOAUTH" {
		t.Fatalf("unauthenticated PING: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, Password: s.cfg.Password})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("authenticated PING: %v", err)
	}
}

// TestRedisDownFailsFast: with no Redis to talk to, a buy fails fast with UNAVAILABLE and
// never falls through to MySQL (invariant I4).
func TestRedisDownFailsFast(t *testing.T) {
	s := start(t, func(c *conf.Config) {
		c.Redis.Addrs = []string{"127.0.0.1:1"}
		c.Buy.CallTimeout = 300 * time.Millisecond
	})
	c := s.client(t, 1)
	ctx := context.Background()
	t0 := time.Now()
	err := c.Do(ctx, "seckill.buy", "sku_down", "u1").Err()
	if code(err) != "UNAVAILABLE" {
		t.Fatalf("buy with Redis down: %v, want UNAVAILABLE", err)
	}
	if took := time.Since(t0); took > 3*time.Second {
		t.Fatalf("UNAVAILABLE took %v", took)
	}
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM seckill_orders WHERE sku = 'sku_down'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("MySQL orders for the buy: %d (%v), want 0", n, err)
	}
}

// TestWaitReplicas runs buys with WAIT 1 on the master's own connection.
func TestWaitReplicas(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Buy.WaitReplicas, c.Buy.WaitTimeout = 1, 200*time.Millisecond })
	c := s.client(t, 4)
	sku := newSKU("wait")
	s.sale(t, c, sku, 50)
	ctx := context.Background()
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, 60)
	for i := range cmds {
		cmds[i] = pipe.Do(ctx, "seckill.buy", sku, "u"+strconv.Itoa(i))
	}
	_, _ = pipe.Exec(ctx)
	ok := 0
	for _, cmd := range cmds {
		switch code(cmd.Err()) {
		case "":
			ok++
		case "SOLDOUT":
		default:
			t.Fatalf("buy with WAIT: %v", cmd.Err())
		}
	}
	if ok != 50 {
		t.Fatalf("%d successes, want 50", ok)
	}
	if short := s.g.Stats().WaitShort; short != 0 {
		t.Fatalf("WAIT came back short %d times with a healthy replica", short)
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// warmed is a WARM reply's stock and units in flight, as "stock N in_flight M".
func warmed(t *testing.T, reply any) string {
	t.Helper()
	m := infoMap(t, reply)
	return "stock " + m["stock"] + " in_flight " + m["in_flight"]
}

// TestSubscriberBuys: a RESP3 client that subscribes is served by a goroutine of its own (in
// loop mode it leaves the loop), and may still buy: its buys run on the same engine, the core
// of the router's buys, and sell what a buy anywhere else sells, once per buyer.
func TestSubscriberBuys(t *testing.T) {
	s := start(t, nil)
	sku := newSKU("subbuy")
	s.sale(t, s.client(t, 2), sku, 3)
	c := dialRaw(t, s.addr)
	if r := c.do(t, "HELLO", "3"); !strings.HasPrefix(r, "%") {
		t.Fatalf("HELLO 3: %q", r)
	}
	ch := "subbuy:" + sku
	if r := c.do(t, "SUBSCRIBE", ch); !strings.HasPrefix(r, ">3\r\n$9\r\nsubscribe\r\n") {
		t.Fatalf("SUBSCRIBE: %q", r)
	}
	first := c.do(t, "SECKILL.BUY", sku, "alice")
	id, ok := strings.CutPrefix(strings.TrimSuffix(first, "\r\n"), "$20\r\n")
	if !ok {
		t.Fatalf("a subscriber's buy: %q, want an order id", first)
	}
	if r := c.do(t, "SECKILL.BUY", sku, "alice"); r != "-DUPLICATE "+id+"\r\n" {
		t.Fatalf("the subscriber buys again: %q, want DUPLICATE %s", r, id)
	}
	ctx := context.Background()
	k := sale.KeysFor(sku)
	if stock, _ := s.rc.Get(ctx, k.Stock).Int(); stock != 2 {
		t.Fatalf("stock = %d, want 2", stock)
	}
	if order, _ := s.rc.HGet(ctx, k.Buyers, "alice").Result(); !strings.HasPrefix(order, id+":") {
		t.Fatalf("alice's order in Redis: %q, want %s", order, id)
	}
}

// TestWarmPipeline: a pipeline of WARMs runs them several at a time and answers each in its
// place; a second WARM of a SKU in the same pipeline runs after the first, as alone (refused
// without FORCE), and a malformed one gets its own error.
func TestWarmPipeline(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	ctx := context.Background()
	var skus []string
	for range 30 {
		sku := newSKU("wpipe")
		s.item(t, sku, 5)
		skus = append(skus, sku)
	}
	pipe := c.Pipeline()
	var cmds []*redis.Cmd
	for i, sku := range skus {
		cmds = append(cmds, pipe.Do(ctx, "seckill.warm", sku))
		if i == 10 {
			cmds = append(cmds, pipe.Do(ctx, "seckill.warm", skus[3]), pipe.Do(ctx, "seckill.warm", skus[4], "LIMIT", "x"))
		}
	}
	_, _ = pipe.Exec(ctx)
	n := 0
	for i, cmd := range cmds {
		switch i {
		case 11: // skus[3] again
			if err := cmd.Err(); err == nil || !strings.Contains(err.Error(), "FORCE") {
				t.Errorf("the second WARM of %s: %v, want a refusal that names FORCE", skus[3], err)
			}
		case 12:
			if code(cmd.Err()) != "ERR" {
				t.Errorf("a malformed WARM: %v, want ERR", cmd.Err())
			}
		default:
			reply, err := cmd.Result()
			if m := infoMap(t, reply); err != nil || m["sku"] != skus[n] || warmed(t, reply) != "stock 5 in_flight 0" {
				t.Errorf("reply %d: %v, %v; want the warm of %s", i, reply, err, skus[n])
			}
			n++
		}
	}
	if n != len(skus) {
		t.Fatalf("%d warms answered, want %d", n, len(skus))
	}
}
