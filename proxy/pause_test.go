package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/sale"
	"seckill-proxy/sink"
)

// told is what one buyer was told: an order id, or the code of an error.
type told struct {
	id, code string
}

// TestMasterPause: the master that owns a sale is stopped (SIGSTOP, as a VM freeze or a
// stalled fork) past the cluster's node timeout while buyers buy, and resumed once its
// replica is promoted. The scripts queued in its socket run when it wakes, still believing
// it is master; none of what they sell may be told as bought, nor reach Kafka. Every buyer
// told an order id ends with that order confirmed in MySQL; the ones told UNAVAILABLE are
// counted. Before, with default settings, about 90 buyers told an order id ended rejected.
func TestMasterPause(t *testing.T) {
	needDevstack(t)
	t.Cleanup(func() {
		if err := devstack(t, "up"); err != nil {
			t.Errorf("could not restore the cluster: %v", err)
		}
	})
	const stock = 4000
	cfg := newConfig(t, nil)
	s := startProxy(t, cfg, true)
	runSink(t, cfg)
	c := s.client(t, 16)
	sku := newSKU("pause")
	s.sale(t, c, sku, stock)
	ctx := context.Background()

	master, pid, replica := saleNodes(t, s, sale.KeysFor(sku).Stock)
	resumed := false
	defer func() {
		if !resumed {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()

	var mu sync.Mutex
	answers := map[string]told{}
	successes := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				uid := "w" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				id, err := c.Do(ctx, "seckill.buy", sku, uid).Text()
				mu.Lock()
				answers[uid] = told{id: id, code: code(err)}
				if err == nil {
					successes++
				}
				mu.Unlock()
				if code(err) == "SOLDOUT" {
					return
				}
				time.Sleep(5 * time.Millisecond) // pace the sale so that it outlasts the pause
			}
		})
	}
	eventually(t, 20*time.Second, "300 orders before the pause", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return successes >= 300
	})
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	eventually(t, 30*time.Second, "the replica promoted", func() bool {
		role, err := replica.Do(ctx, "role").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
	time.Sleep(time.Until(stopped.Add(5 * time.Second))) // the fault's length: 5 s in all
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	old := redis.NewClient(&redis.Options{Addr: master.Options().Addr})
	defer old.Close()
	eventually(t, 30*time.Second, "the old master back as a replica", func() bool {
		info, err := old.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
	})
	time.Sleep(2 * time.Second) // buys go on after the fault
	close(stop)
	wg.Wait()

	// Drain: every order the buyers were told of, and any the sweeper publishes, in MySQL.
	mu.Lock()
	defer mu.Unlock()
	var ids []string
	notKnown := 0
	for _, a := range answers {
		switch {
		case a.code == "" && a.id != "":
			ids = append(ids, a.id)
		case a.code == "UNAVAILABLE":
			notKnown++
		}
	}
	s.waitOutboxEmpty(t, sku, 60*time.Second)
	status := map[string]string{}
	eventually(t, 60*time.Second, "every order told of stored", func() bool {
		rows, err := s.db.Query(`SELECT order_id, status FROM seckill_orders WHERE sku = ?`, sku)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, st string
			if err := rows.Scan(&id, &st); err != nil {
				t.Fatal(err)
			}
			status[id] = st
		}
		for _, id := range ids {
			if status[id] == "" {
				return false
			}
		}
		return true
	})
	bad := 0
	for _, id := range ids {
		if status[id] != sink.StatusConfirmed {
			bad++
			if bad <= 5 {
				t.Errorf("order %s was told bought and ended %s", id, status[id])
			}
		}
	}
	confirmedUnknown := 0
	told := map[string]bool{}
	for _, id := range ids {
		told[id] = true
	}
	for id, st := range status {
		if !told[id] && st == sink.StatusConfirmed {
			confirmedUnknown++
		}
	}
	t.Logf("%d buyers told bought, %d of them not confirmed; %d told UNAVAILABLE, %d orders confirmed that no buyer was told of; stats %+v",
		len(ids), bad, notKnown, confirmedUnknown, s.g.Stats())
	if bad > 0 {
		t.Fatalf("%d buyers told bought ended otherwise", bad)
	}
}
