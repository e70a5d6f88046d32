package proxy_test

import (
	"context"
	"database/sql"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/internal/schema"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/proxy"
	"seckill-proxy/router"
)

// stack is a proxy started in-process on 127.0.0.1:0 against the real cluster and MariaDB.
type stack struct {
	cfg  conf.Config
	rc   *redis.ClusterClient
	db   *sql.DB
	g    *guard.Guard
	addr string
}

func start(t *testing.T, mutate func(*conf.Config)) *stack {
	t.Helper()
	cfg := testenv.Config(t)
	testenv.Redis(t)
	db := testenv.MySQL(t)
	if mutate != nil {
		mutate(&cfg)
	}
	ctx := context.Background()
	if _, err := schema.Migrate(ctx, db, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	rc := guard.NewClusterClient(cfg.Redis)
	g := guard.New(rc, db, log, guard.Options{Buy: cfg.Buy, MaxInflight: cfg.Limits.MaxInflight, Instance: "test"})
	r := router.New(g, log, router.Options{Password: cfg.Password, CompatReplies: cfg.Buy.CompatReplies, MaxArgBytes: cfg.Limits.MaxArgBytes})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(r, log, cfg.Limits)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		g.Close()
		_ = rc.Close()
	})
	return &stack{cfg: cfg, rc: rc, db: db, g: g, addr: ln.Addr().String()}
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
	t.Cleanup(func() {
		_, _ = s.db.Exec(`DELETE FROM seckill_items WHERE sku = ?`, sku)
		k := guard.KeysFor(sku)
		_ = s.rc.Del(context.Background(), k.Stock, k.Meta, k.Buyers, k.Outbox, k.Result).Err()
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

// code is the first word of a RESP error, or "" for no error.
func code(err error) string {
	if err == nil {
		return ""
	}
	word, _, _ := strings.Cut(err.Error(), " ")
	return word
}
