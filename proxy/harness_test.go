package proxy_test

import (
	"context"
	"database/sql"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"seckill-proxy/app"
	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/schema"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/outbox"
	"seckill-proxy/proxy"
	"seckill-proxy/sale"
	"seckill-proxy/sink"
)

// stack is a proxy started in-process on 127.0.0.1:0 against the real cluster, Kafka and
// MariaDB, as cmd/seckill-proxy builds it.
type stack struct {
	cfg     conf.Config
	rc      *redis.ClusterClient
	db      *sql.DB
	g       *guard.Guard
	tee     *outbox.Tee
	addr    string
	tlsAddr string               // tls_listen's, if set
	admin   http.Handler         // the admin port's handler: /metrics, /readyz, ...
	metrics *proxy.Metrics       // its metrics; the live sale page's sampler runs only if runSampler is called
	fields  func() []guard.Field // INFO seckill's fields, from which the metrics are derived
	close   func()               // stops the proxy; tests that stop it early call it, cleanup calls it again
}

// runSampler runs the live sale page's sampler every interval until the test ends.
func (s *stack) runSampler(t *testing.T, interval time.Duration) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.metrics.RunSampler(ctx, interval)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
}

// dataCleanups holds, per test, the removal of the test's items and keys. It runs after every
// proxy and sink of the test has stopped (newConfig registers it first, so it runs last):
// otherwise a sweeper or a sink could still be writing what is being removed.
var dataCleanups sync.Map // *testing.T -> *[]func()

func onDataCleanup(t *testing.T, f func()) {
	v, _ := dataCleanups.LoadOrStore(t, new([]func()))
	fs := v.(*[]func())
	*fs = append(*fs, f)
}

// newConfig is the environment's configuration with a topic and group of the test's own, so
// that tests do not see each other's orders.
func newConfig(t *testing.T, mutate func(*conf.Config)) conf.Config {
	t.Helper()
	cfg := testenv.Config(t)
	testenv.Redis(t)
	if _, loaded := dataCleanups.LoadOrStore(t, new([]func())); !loaded {
		t.Cleanup(func() {
			v, _ := dataCleanups.LoadAndDelete(t)
			for _, f := range *v.(*[]func()) {
				f()
			}
		})
	}
	id := xid.New().String()
	cfg.Kafka.Topic, cfg.Kafka.DeadLetterTopic, cfg.Kafka.Group = "test."+id, "test."+id+".dlq", "test-"+id
	cfg.Log.Level = "warn"
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	onDataCleanup(t, func() { testenv.DeleteTopics(t, cfg.Kafka.Brokers, cfg.Kafka.Topic, cfg.Kafka.DeadLetterTopic) })
	return cfg
}

// start is startProxy on a new configuration, with a tee and a sweeper.
func start(t *testing.T, mutate func(*conf.Config)) *stack {
	t.Helper()
	return startProxy(t, newConfig(t, mutate), true)
}

// startProxy starts a proxy on cfg, assembled as the binary assembles it (app), on
// 127.0.0.1:0. withTee false leaves orders in the outboxes, as a proxy killed between the
// script and Kafka does.
func startProxy(t *testing.T, cfg conf.Config, withTee bool) *stack {
	t.Helper()
	db := testenv.MySQL(t)
	if _, err := schema.Migrate(context.Background(), db, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := app.Start(cfg, app.Options{Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), DB: db,
		Instance: "test-" + xid.New().String(), NoTee: !withTee, Listener: ln, ACLRetry: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{cfg: cfg, rc: p.Redis, db: db, g: p.Guard, tee: p.Tee, addr: p.Addr, tlsAddr: p.TLSAddr, admin: p.AdminHandler(),
		metrics: p.Metrics, fields: p.Router.InfoFields}
	s.close = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(sctx, 5*time.Second); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
	t.Cleanup(s.close)
	// Where Redis cannot be reached (a test of that), pass-through stays unverified.
	select {
	case <-p.Verified():
		// A proxy hears the others' sale events once subscribed: a test's second proxy
		// must not miss the first one's events for starting late.
		eventually(t, 10*time.Second, "the proxy subscribed to the sale events", s.g.Subscribed)
	case err := <-p.Unfit():
		t.Fatal(err)
	case <-time.After(3 * time.Second):
	}
	// A buy on a master with no replica online (the dev stack's standalone server) is told
	// only once Kafka holds it (buy.no_replica kafka): the tee is given the time to connect,
	// unless the test keeps Kafka away on purpose.
	for end := time.Now().Add(10 * time.Second); withTee && p.Tee != nil && !p.Tee.Healthy() && time.Now().Before(end); {
		if len(cfg.Kafka.Brokers) > 0 && cfg.Kafka.Brokers[0] == "127.0.0.1:1" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// runSink runs a sink on cfg until the test ends.
func runSink(t testing.TB, cfg conf.Config) *sink.Sink {
	t.Helper()
	testenv.Kafka(t)
	db := testenv.MySQL(t)
	rc := connect.Redis(cfg.Redis)
	snk := sink.NewSink(cfg, db, rc, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- snk.Run(ctx, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sink: %v", err)
		}
		_ = rc.Close()
	})
	return snk
}

// client is an ordinary go-redis client of the proxy, with poolSize connections.
func (s *stack) client(t *testing.T, poolSize int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: poolSize, MinIdleConns: poolSize, ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newSKU names a SKU no other test run uses.
func newSKU(prefix string) string { return prefix + "_" + xid.New().String() }

// item creates the back office's seckill_items row.
func (s *stack) item(t *testing.T, sku string, stock int) {
	t.Helper()
	if _, err := s.db.Exec(`INSERT INTO seckill_items (sku, stock) VALUES (?, ?)`, sku, stock); err != nil {
		t.Fatal(err)
	}
	cfg := s.cfg.Redis
	onDataCleanup(t, func() {
		_, _ = s.db.Exec(`DELETE FROM seckill_items WHERE sku = ?`, sku)
		_, _ = s.db.Exec(`DELETE FROM seckill_item_buckets WHERE sku = ?`, sku)
		_, _ = s.db.Exec(`DELETE FROM seckill_orders WHERE sku = ?`, sku)
		rc := connect.Redis(cfg)
		defer rc.Close()
		ctx := context.Background()
		tags, err := sale.ParseBuckets(rc.HGet(ctx, sale.KeysFor(sku).Meta, "buckets").Val())
		if err != nil {
			tags = []int{0}
		}
		for _, tag := range tags {
			for _, nk := range sale.BucketKeys(sku, tag).Named() {
				_ = rc.Del(ctx, nk[1]).Err()
			}
		}
		_ = rc.SRem(ctx, sale.SalesKey, sku).Err()
	})
}

// sale creates an item and warms it through the proxy.
func (s *stack) sale(t *testing.T, c *redis.Client, sku string, stock int, opts ...any) {
	t.Helper()
	s.item(t, sku, stock)
	args := append([]any{"seckill.warm", sku}, opts...)
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("WARM %s: %v", sku, err)
	}
}

// eventually polls cond every 20 ms until it holds, or fails the test after limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// devstack runs scripts/devstack.sh with args.
func devstack(t *testing.T, args ...string) error {
	t.Helper()
	out, err := exec.Command("../scripts/devstack.sh", args...).CombinedOutput()
	if err != nil {
		t.Logf("devstack %v: %s", args, out)
	}
	return err
}

// needDevstack fails or skips a test that stops services unless they are the dev stack's own.
func needDevstack(t *testing.T) {
	t.Helper()
	if err := devstack(t, "status"); err != nil {
		if testenv.Required() {
			t.Fatal("this test stops services, and needs the dev stack's own: scripts/devstack.sh up")
		}
		t.Skip("this test stops services, and needs the dev stack's own")
	}
}

// produce writes raw values to topic, keyed by key.
func produce(t *testing.T, cfg conf.Config, key string, values ...[]byte) {
	t.Helper()
	sc, err := connect.Sarama(cfg.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sarama.NewSyncProducer(cfg.Kafka.Brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, v := range values {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: cfg.Kafka.Topic, Key: sarama.StringEncoder(key), Value: sarama.ByteEncoder(v)}); err != nil {
			t.Fatal(err)
		}
	}
}

// createPassthroughUser makes the pass-through user on a Redis server of the test's own, as
// the dev stack does on its nodes.
func createPassthroughUser(t *testing.T, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	args := []any{"ACL", "SETUSER", conf.DefaultPassthroughUser, "reset", "on", "nopass"}
	for _, a := range sale.PassthroughACL() {
		args = append(args, a)
	}
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(err)
	}
}

// code is the first word of a RESP error, or "" for no error.
func code(err error) string {
	if err == nil {
		return ""
	}
	word, _, _ := strings.Cut(err.Error(), " ")
	return word
}
