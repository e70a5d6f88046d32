package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"

	"seckill-proxy/sale"
	"seckill-proxy/sink"
)

// infoFields reads SECKILL.INFO of sku through c as a map.
func infoFields(t *testing.T, c *redis.Client, sku string) map[string]string {
	t.Helper()
	v, err := c.Do(context.Background(), "seckill.info", sku).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", sku, err)
	}
	out := map[string]string{}
	switch v := v.(type) {
	case map[any]any: // RESP3
		for k, x := range v {
			out[fmt.Sprint(k)] = fmt.Sprint(x)
		}
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			out[fmt.Sprint(v[i])] = fmt.Sprint(v[i+1])
		}
	default:
		t.Fatalf("INFO %s: %T", sku, v)
	}
	return out
}

// bucketLine reads one of INFO's bucket_<i> lines ("tag=3,master=...,stock=10,...").
func bucketLine(line string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(line, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// uidsHomed returns n uids whose home bucket in a sale of k buckets is home.
func uidsHomed(prefix string, n, k, home int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		if uid := prefix + strconv.Itoa(i); sale.Home(uid, k) == home {
			out = append(out, uid)
		}
	}
	return out
}

// TestBucketsSale: the seeds' sale, its 2,000 units split over 3 buckets on 3 masters: the
// buckets lie on distinct masters, exactly the stock is sold and stored, every order once, no
// buyer twice, and CHECK agrees once drained.
func TestBucketsSale(t *testing.T) {
	const units, buyers, conns = 2000, 20000, 100
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, conns)
	// The sink creates the run's topic; WARM spreads the buckets over the partitions Kafka
	// names, so the sale is warmed once the topic is there.
	kc, err := sarama.NewClient(cfg.Kafka.Brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	var ps []int32
	eventually(t, 20*time.Second, "the sink created the orders topic", func() bool {
		_ = kc.RefreshMetadata(cfg.Kafka.Topic)
		ps, err = kc.Partitions(cfg.Kafka.Topic)
		return err == nil && len(ps) >= 3
	})
	sku := newSKU("buckets")
	s.sale(t, c, sku, units, "BUCKETS", 3)

	info := infoFields(t, c, sku)
	if info["buckets"] != "3" || !strings.HasSuffix(info["route"], " buckets=1") {
		t.Fatalf("INFO buckets %q (want 3), route %q (want a split sale's)", info["buckets"], info["route"])
	}
	masters := map[string]bool{}
	parts := map[int32]bool{}
	hp := sarama.NewHashPartitioner(cfg.Kafka.Topic)
	var total int64
	for i := range 3 {
		b := bucketLine(info["bucket_"+strconv.Itoa(i)])
		masters[b["master"]] = true
		tag, _ := strconv.Atoi(b["tag"])
		p, _ := hp.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(sale.Tag(sku, tag))}, int32(len(ps)))
		parts[p] = true
		n, _ := strconv.ParseInt(b["stock"], 10, 64)
		total += n
		if n < units/3 || n > units/3+1 {
			t.Errorf("bucket %d holds %d units, want %d's share of %d", i, n, units/3, units)
		}
	}
	if len(masters) != 3 || len(parts) != 3 || total != units {
		t.Fatalf("buckets on %d masters and %d of %d partitions (want 3 and 3), %d units in all (want %d): %v",
			len(masters), len(parts), len(ps), total, units, info)
	}
	mysqlRows := func() (own, rows, sum int64) {
		if err := s.db.QueryRow(`SELECT i.stock, (SELECT COUNT(*) FROM seckill_item_buckets b WHERE b.sku = i.sku),
			(SELECT COALESCE(SUM(stock), 0) FROM seckill_item_buckets b WHERE b.sku = i.sku) FROM seckill_items i WHERE i.sku = ?`, sku).Scan(&own, &rows, &sum); err != nil {
			t.Fatal(err)
		}
		return own, rows, sum
	}
	if own, rows, sum := mysqlRows(); own != 0 || rows != 3 || sum != units {
		t.Fatalf("mysql after WARM: seckill_items.stock %d, %d bucket rows holding %d; want 0, 3, %d", own, rows, sum, units)
	}

	ids, replies := buyAll(t, c, sku, "u", buyers, conns)
	if replies[""] != units || replies["SOLDOUT"] != buyers-units {
		t.Fatalf("replies %v, want %d orders and the rest SOLDOUT", replies, units)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("order %s handed out twice", id)
		}
		seen[id] = true
	}
	// A buyer who bought gets DUPLICATE, wherever the units came from.
	for i := range 200 {
		err := c.Do(context.Background(), "seckill.buy", sku, "u"+strconv.Itoa(i)).Err()
		if code(err) != "DUPLICATE" && code(err) != "SOLDOUT" {
			t.Fatalf("a second buy of u%d: %v", i, err)
		}
	}
	s.waitConfirmed(t, sku, units, 60*time.Second)
	st, stock := s.mysqlOrders(t, sku)
	if stock != 0 || st[sink.StatusRejected] != 0 {
		t.Fatalf("mysql: %v, stock %d", st, stock)
	}
	s.checkOrdersInMySQL(t, sku, ids)
	if own, rows, sum := mysqlRows(); own != 0 || rows != 3 || sum != 0 {
		t.Fatalf("mysql after the sale: seckill_items.stock %d, %d bucket rows holding %d; want 0, 3, 0", own, rows, sum)
	}
	waitCheckOK(t, c, sku, 30*time.Second)
	info = infoFields(t, c, sku)
	if info["remaining_stock"] != "0" || info["sold"] != strconv.Itoa(units) || info["buyers"] != strconv.Itoa(units) ||
		info["confirmed"] != strconv.Itoa(units) || info["reservations"] != "0" {
		t.Fatalf("INFO after the sale: %v", info)
	}
}

// TestBucketsOneHome: every buyer's home is one bucket of three; every unit is still sold
// (the others give theirs), SOLDOUT only after the last, never twice to one buyer; STATUS
// and RELEASE find a donated order at its buyer's home.
func TestBucketsOneHome(t *testing.T) {
	const units = 30
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, 4)
	ctx := context.Background()
	sku := newSKU("onehome")
	s.sale(t, c, sku, units, "BUCKETS", 3)
	uids := uidsHomed("h", units+5, 3, 1)
	var ids []string
	for i, uid := range uids {
		id, err := c.Do(ctx, "seckill.buy", sku, uid).Text()
		switch {
		case i < units && err != nil:
			t.Fatalf("buy %d of %d units (uid %s): %v; every bucket but one still has stock", i+1, units, uid, err)
		case i >= units && code(err) != "SOLDOUT":
			t.Fatalf("buy %d after the last unit: %q %v, want SOLDOUT", i+1, id, err)
		}
		if err == nil {
			ids = append(ids, id)
		}
	}
	if err := c.Do(ctx, "seckill.buy", sku, uids[units-1]).Err(); code(err) != "DUPLICATE" {
		t.Fatalf("a donated order's buyer buys again: %v, want DUPLICATE", err)
	}
	fields := s.fields()
	var donated int64
	for _, f := range fields {
		if f.Name == "buy_donated" {
			donated, _ = f.Value.(int64)
		}
	}
	if donated != units-units/3 {
		t.Errorf("buy_donated %d, want %d (the units of the two other buckets)", donated, units-units/3)
	}
	s.waitConfirmed(t, sku, units, 30*time.Second)
	s.checkOrdersInMySQL(t, sku, ids)
	last := uids[units-1]
	eventually(t, 10*time.Second, "STATUS confirmed for a donated order", func() bool {
		st, _ := c.Do(ctx, "seckill.status", sku, last).Text()
		return st == "confirmed "+ids[units-1]
	})
	if err := c.Do(ctx, "seckill.release", sku, last).Err(); err != nil {
		t.Fatalf("RELEASE of a donated order: %v", err)
	}
	// The unit is back: the next buyer gets it.
	if _, err := c.Do(ctx, "seckill.buy", sku, uids[units]).Text(); err != nil {
		t.Fatalf("a buy after the release: %v", err)
	}
	waitCheckOK(t, c, sku, 30*time.Second)
}

// TestBucketsSettleReservations: a proxy stopped between the donor steps leaves reservations
// at home. One whose donor gave the units is confirmed, and its order reaches MySQL; one that
// no donor gave is dropped, and the order id is closed to donations in every other bucket, so
// a donate.lua still on its way sells nothing. Nothing is lost or sold twice.
func TestBucketsSettleReservations(t *testing.T) {
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, 2)
	ctx := context.Background()
	sku := newSKU("settle")
	s.sale(t, c, sku, 30, "BUCKETS", 3)
	info := infoFields(t, c, sku)
	var lay sale.Layout
	lay.SKU = sku
	for i := range 3 {
		tag, _ := strconv.Atoi(bucketLine(info["bucket_"+strconv.Itoa(i)])["tag"])
		lay.Tags = append(lay.Tags, tag)
	}
	now, err := s.rc.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	old := float64(now.Add(-time.Minute).UnixMilli())
	home := lay.Keys(0)
	a, b := uidsHomed("a", 1, 3, 0)[0], uidsHomed("b", 1, 3, 0)[0]
	idA, idB := xid.New().String(), xid.New().String()
	for uid, id := range map[string]string{a: idA, b: idB} {
		if err := s.rc.HSet(ctx, home.Buyers, uid, "r:"+id+":1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.rc.ZAdd(ctx, home.Reserved, redis.Z{Score: old, Member: id + ":1:" + uid}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// a's donor (bucket 1) gave the unit, as donate.lua does, and the proxy stopped there.
	donor := lay.Keys(1)
	if err := s.rc.DecrBy(ctx, donor.Stock, 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.rc.HSet(ctx, donor.Donated, idA, strconv.Itoa(lay.Tags[0])+":1:"+a).Err(); err != nil {
		t.Fatal(err)
	}
	entry := sale.EntryFields(sale.Sold{OrderID: idA, UID: a, Qty: 1, Version: 1, TS: now.UnixMilli(), By: "stopped",
		Bucket: lay.Tags[1], Home: lay.Tags[0]})
	if err := s.rc.XAdd(ctx, &redis.XAddArgs{Stream: donor.Outbox, Values: entry}).Err(); err != nil {
		t.Fatal(err)
	}

	eventually(t, 30*time.Second, "the sweeper settled both reservations", func() bool {
		return s.rc.ZCard(ctx, home.Reserved).Val() == 0
	})
	if v := s.rc.HGet(ctx, home.Buyers, a).Val(); v != idA+":1" {
		t.Errorf("a's reservation, which bucket 1 gave: %q, want the order %s:1", v, idA)
	}
	if err := s.rc.HGet(ctx, home.Buyers, b).Err(); err != redis.Nil {
		t.Errorf("b's reservation, which no bucket gave: %v, want it dropped", err)
	}
	for i := 1; i < 3; i++ {
		if v := s.rc.HGet(ctx, lay.Keys(i).Donated, idB).Val(); v != "tomb" {
			t.Errorf("bucket %d's record of b's order: %q, want a tombstone", i, v)
		}
	}
	s.waitConfirmed(t, sku, 1, 30*time.Second)
	s.checkOrdersInMySQL(t, sku, []string{idA})
	eventually(t, 10*time.Second, "STATUS of a settled order", func() bool {
		st, _ := c.Do(ctx, "seckill.status", sku, a).Text()
		return st == "confirmed "+idA
	})
	// b may buy: the reservation is gone, and the stock is whole.
	if _, err := c.Do(ctx, "seckill.buy", sku, b).Text(); err != nil {
		t.Fatalf("b buys after the settling: %v", err)
	}
	waitCheckOK(t, c, sku, 30*time.Second)
}

// TestBucketsRewarm: a forced re-warm of an open split sale keeps its buckets (another k is
// refused, naming why) and its MySQL rows; a new sale of one bucket, once the split one is
// closed and drained, folds the rows back into seckill_items.
func TestBucketsRewarm(t *testing.T) {
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, 2)
	ctx := context.Background()
	sku := newSKU("rewarm")
	s.sale(t, c, sku, 9, "BUCKETS", 3)
	for _, uid := range []string{"a", "b"} {
		if err := c.Do(ctx, "seckill.buy", sku, uid).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s.waitConfirmed(t, sku, 2, 30*time.Second)
	err := c.Do(ctx, "seckill.warm", sku, "BUCKETS", "2", "FORCE").Err()
	if err == nil || !strings.Contains(err.Error(), "open with 3 buckets") {
		t.Fatalf("a forced re-warm with another k: %v, want a refusal naming the 3 buckets", err)
	}
	v, err := c.Do(ctx, "seckill.warm", sku, "FORCE").Result()
	if err != nil || !strings.Contains(fmt.Sprint(v), "buckets:3") && !strings.Contains(fmt.Sprint(v), "buckets 3") {
		t.Fatalf("a forced re-warm: %v %v, want the sale's 3 buckets kept", v, err)
	}
	if err := c.Do(ctx, "seckill.buy", sku, "a").Err(); code(err) != "DUPLICATE" {
		t.Fatalf("a buyer of the kept sale buys again: %v, want DUPLICATE", err)
	}
	if err := c.Do(ctx, "seckill.close", sku).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "seckill.buy", sku, "z").Err(); code(err) != "CLOSED" {
		t.Fatalf("a buy of the closed split sale: %v, want CLOSED", err)
	}
	// The sink has stored both orders, but the tee deletes their outbox entries a moment
	// after Kafka's acknowledgement (outbox.delete_flush): until then WARM answers that orders
	// are on their way, and says to warm again.
	var warmErr error
	eventually(t, 10*time.Second, "a new sale of one bucket once the outboxes are empty", func() bool {
		warmErr = c.Do(ctx, "seckill.warm", sku).Err()
		return warmErr == nil || !strings.Contains(warmErr.Error(), "on their way")
	})
	if warmErr != nil {
		t.Fatalf("a new sale of one bucket: %v", warmErr)
	}
	var own, rows int64
	if err := s.db.QueryRow(`SELECT stock, (SELECT COUNT(*) FROM seckill_item_buckets WHERE sku = ?) FROM seckill_items WHERE sku = ?`, sku, sku).Scan(&own, &rows); err != nil {
		t.Fatal(err)
	}
	if own != 7 || rows != 0 {
		t.Fatalf("mysql after the new sale: seckill_items.stock %d, %d bucket rows; want 7, 0", own, rows)
	}
	if info := infoFields(t, c, sku); info["buckets"] != "1" || info["remaining_stock"] != "7" {
		t.Fatalf("INFO of the new sale: buckets %s, remaining %s; want 1, 7", info["buckets"], info["remaining_stock"])
	}
	if _, err := c.Do(ctx, "seckill.buy", sku, "a").Text(); err != nil {
		t.Fatalf("a buyer of the old sale buys in the new one: %v", err)
	}
}
