package proxy_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"
	"go.uber.org/zap"

	"seckill-proxy/app"
	"seckill-proxy/internal/schema"
	"seckill-proxy/internal/testenv"
)

// BenchmarkStatusWait: what a buyer who waits for the outcome of an order costs, against one
// who polls SECKILL.STATUS once a second. Each way, 5,000 buyers of a sale each hold an order
// the sink has not stored yet (no sink runs); they wait (or poll) for 5 s, then a sink starts,
// and the phase ends once every one has been told "confirmed". The buyers are another process
// (this test binary again: waitClients, pollClients). Reported:
//
//   - calls/waiter and calls/poller: the Redis calls made meanwhile, from every master's INFO
//     commandstats, per buyer: the STATUS script's and the sink's calls (EVALSHA and EVAL,
//     counted once for a script), and the outcome streams' reads (XREAD, XREVRANGE). Not
//     counted: the HMGET of the waiters' catch-up (one per sale every status.resync, 5 s),
//     since admission's sync reads every sale's rate with HMGET too, whatever the buyers do
//     (about 300 a second on a dev stack of 65 sales);
//
//   - all-cmds/waiter and all-cmds/poller: every command commandstats counts, the commands a
//     script runs inside included;
//
//   - fewer-x: calls/poller over calls/waiter (the goal: at least 10);
//
//   - bytes/waiter: the proxy's heap and stacks with the buyers waiting, less before, per buyer.
//
//     go test ./proxy -run XXX -bench BenchmarkStatusWait -benchtime 1x
func BenchmarkStatusWait(b *testing.B) {
	const n, hold = 5000, 5 * time.Second
	for b.Loop() {
		poll := statusPhase(b, "poll", n, hold)
		wait := statusPhase(b, "wait", n, hold)
		b.ReportMetric(wait.calls/n, "calls/waiter")
		b.ReportMetric(poll.calls/n, "calls/poller")
		b.ReportMetric(wait.all/n, "all-cmds/waiter")
		b.ReportMetric(poll.all/n, "all-cmds/poller")
		b.ReportMetric(poll.calls/max(wait.calls, 1), "fewer-x")
		b.ReportMetric(wait.bytes/n, "bytes/waiter")
		b.ReportMetric(float64(poll.polls)/n, "polls/poller")
	}
}

// phaseCost is what one way of learning the outcome cost.
type phaseCost struct {
	calls, all, bytes float64
	polls             int64
}

// topLevel are the commands counted as calls: a script never runs them inside (the proxy's and
// the sink's scripts call HGET, HSET, XADD, HINCRBY and such).
var topLevel = map[string]bool{"evalsha": true, "eval": true, "xread": true, "xrevrange": true}

// statusPhase runs one way (mode "wait" or "poll") for n buyers: a proxy and a sale of its own,
// n orders, the buyers' process, the hold, then a sink; it returns what it cost.
func statusPhase(b *testing.B, mode string, n int, hold time.Duration) phaseCost {
	cfg := testenv.Config(b)
	id := xid.New().String()
	cfg.Kafka.Topic, cfg.Kafka.DeadLetterTopic, cfg.Kafka.Group = "bench."+id, "bench."+id+".dlq", "bench-"+id
	b.Cleanup(func() { testenv.DeleteTopics(b, cfg.Kafka.Brokers, cfg.Kafka.Topic, cfg.Kafka.DeadLetterTopic) })
	cfg.Limits.MaxClients = 2 * n
	cfg.Log.Level = "warn"
	db := testenv.MySQL(b)
	if _, err := schema.Migrate(context.Background(), db, zap.NewNop()); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p, err := app.Start(cfg, app.Options{Log: zap.NewNop(), DB: db, Instance: "bench-" + id, Listener: ln, ACLRetry: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Shutdown(context.Background(), 5*time.Second) })
	select {
	case <-p.Verified():
	case err := <-p.Unfit():
		b.Fatal(err)
	}
	addr := p.Addr
	sku := "statusbench_" + id
	if _, err := db.Exec(`INSERT INTO seckill_items (sku, stock) VALUES (?, ?)`, sku, n); err != nil {
		b.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 32, Protocol: 2})
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	if err := c.Do(ctx, "seckill.warm", sku).Err(); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				if err := c.Do(ctx, "seckill.buy", sku, "u"+strconv.Itoa(i)).Err(); err != nil {
					b.Errorf("buy %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.Redis.Addrs})
	b.Cleanup(func() { _ = cluster.Close() })
	calls0, all0 := commandCalls(b, cluster)
	before := proxyMemory()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), waitClientsEnv+"="+mode+" "+addr+" "+sku+" "+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var cost phaseCost
	if mode == "wait" {
		deadline := time.Now().Add(time.Minute)
		for infoCounter(b, addr, "status_waiting") < int64(n) {
			if time.Now().After(deadline) {
				b.Fatalf("%d buyers do not wait within a minute", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cost.bytes = float64(proxyMemory() - before)
	}
	time.Sleep(hold) // the buyers wait, or poll, for the sink that has not started
	runSink(b, cfg)
	lines := bufio.NewScanner(out)
	told := 0
	for lines.Scan() {
		switch line := lines.Text(); {
		case strings.HasPrefix(line, "polls "):
			var err error
			if cost.polls, err = strconv.ParseInt(strings.TrimPrefix(line, "polls "), 10, 64); err != nil {
				b.Fatalf("from the pollers: %q", line)
			}
			told = n
		case strings.Contains(line, " confirmed "):
			told++
		default:
			b.Fatalf("from the buyers: %q", line)
		}
	}
	if err := cmd.Wait(); err != nil || told != n {
		b.Fatalf("%d of %d buyers told their outcome (%v)", told, n, err)
	}
	calls1, all1 := commandCalls(b, cluster)
	cost.calls, cost.all = float64(calls1-calls0), float64(all1-all0)
	return cost
}

// commandCalls sums every master's INFO commandstats: the top-level calls, and every command.
func commandCalls(b *testing.B, cluster *redis.ClusterClient) (top, all int64) {
	var mu sync.Mutex
	err := cluster.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
			if !ok {
				continue
			}
			v, _, _ := strings.Cut(rest, ",")
			calls, _ := strconv.ParseInt(v, 10, 64)
			mu.Lock()
			all += calls
			if topLevel[name] {
				top += calls
			}
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return top, all
}

// proxyMemory is this process's heap and goroutine stacks in use, after a collection: the
// proxy runs here, its buyers in another process.
func proxyMemory() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// infoCounter reads one of the proxy's INFO seckill counters over RESP.
func infoCounter(b *testing.B, addr, name string) int64 {
	c := dialBench(b, addr)
	defer c.c.Close()
	reply := c.do(b, "INFO", "seckill")
	_, body, _ := strings.Cut(reply, "\r\n")
	for _, line := range strings.Split(body, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}
