package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill-proxy/conf"
	"seckill-proxy/sale"
)

// TestLoneMasterToldOnlyWithKafka: a buy on a master with no replica online is told its order
// only once a second copy exists: with buy.no_replica at its default (kafka), once Kafka holds
// it. On a private redis-server, which has no replica: with Kafka unreachable no buy runs, each
// told UNAVAILABLE and that it did not run, and the stock is whole (before, every one was told
// an order held once, in a master that a crash with its proxy would take away); with Kafka up
// each is told its order once Kafka acknowledged it (buy_told_by_kafka); with no_replica
// refuse none runs; with tell each is told at once, and counted as told with one copy.
func TestLoneMasterToldOnlyWithKafka(t *testing.T) {
	addr, startRedis := ownRedis(t)
	startRedis()
	ctx := context.Background()
	buy := func(s *stack, sku string, n int) (told int, errs []error) {
		t.Helper()
		c := s.client(t, 4)
		for i := range n {
			id, err := c.Do(ctx, "seckill.buy", sku, fmt.Sprintf("u%d", i)).Text()
			switch {
			case err == nil && id != "":
				told++
			case err != nil:
				errs = append(errs, err)
			}
		}
		return told, errs
	}
	stock := func(s *stack, sku string) int {
		n, _ := s.rc.Get(ctx, sale.KeysFor(sku).Stock).Int()
		return n
	}

	down := startOn(t, addr, func(c *conf.Config) { c.Kafka.Brokers = []string{"127.0.0.1:1"} })
	sku := newSKU("lone")
	down.sale(t, down.client(t, 1), sku, 10)
	told, errs := buy(down, sku, 5)
	if told != 0 || len(errs) != 5 {
		t.Fatalf("Kafka unreachable, no replica: %d told, errors %v; want none told", told, errs)
	}
	for _, err := range errs {
		if code(err) != "UNAVAILABLE" || !strings.Contains(err.Error(), "did not run") {
			t.Fatalf("Kafka unreachable, no replica: %v, want UNAVAILABLE saying the buy did not run", err)
		}
	}
	if left := stock(down, sku); left != 10 {
		t.Fatalf("stock %d after buys that did not run, want 10", left)
	}

	up := startOn(t, addr, nil)
	eventually(t, 30*time.Second, "the tee connects", up.tee.Healthy)
	sku = newSKU("lone")
	up.sale(t, up.client(t, 1), sku, 10)
	told, errs = buy(up, sku, 5)
	if told != 5 {
		t.Fatalf("Kafka up, no replica: %d told, errors %v; want 5", told, errs)
	}
	if st := up.g.Stats(); st.ToldByKafka != 5 || st.ToldUnreplicated != 0 {
		t.Fatalf("buy_told_by_kafka %d, buy_told_unreplicated %d; want 5 and 0", st.ToldByKafka, st.ToldUnreplicated)
	}
	if acked := up.tee.Stats().Acked; acked < 5 {
		t.Fatalf("Kafka acknowledged %d orders when 5 buyers were told theirs", acked)
	}

	refuse := startOn(t, addr, func(c *conf.Config) { c.Buy.NoReplica = conf.NoReplicaRefuse })
	sku = newSKU("lone")
	refuse.sale(t, refuse.client(t, 1), sku, 10)
	if told, errs := buy(refuse, sku, 3); told != 0 || len(errs) != 3 || refuse.g.Stats().RefusedNoReplica != 3 {
		t.Fatalf("no_replica refuse: %d told, errors %v, %d counted refused", told, errs, refuse.g.Stats().RefusedNoReplica)
	}

	tell := startOn(t, addr, func(c *conf.Config) {
		c.Buy.NoReplica = conf.NoReplicaTell
		c.Kafka.Brokers = []string{"127.0.0.1:1"}
	})
	sku = newSKU("lone")
	tell.sale(t, tell.client(t, 1), sku, 10)
	if told, errs := buy(tell, sku, 3); told != 3 || tell.g.Stats().ToldUnreplicated != 3 {
		t.Fatalf("no_replica tell with Kafka unreachable: %d told (errors %v), %d counted told unreplicated", told, errs, tell.g.Stats().ToldUnreplicated)
	}
}
