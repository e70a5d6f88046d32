package proxy_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/schema"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/sink"
)

// forwarder relays TCP connections from its own address to target once Start is called;
// until then nothing listens there, as with a database that is down.
type forwarder struct {
	addr, target string
	ln           net.Listener
	wg           sync.WaitGroup
}

// newForwarder reserves a loopback port for a forwarder to target, and frees it again.
func newForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{addr: ln.Addr().String(), target: target}
	_ = ln.Close()
	t.Cleanup(f.stop)
	return f
}

func (f *forwarder) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	f.ln = ln
	f.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", f.target)
			if err != nil {
				_ = in.Close()
				continue
			}
			f.wg.Go(func() { _, _ = io.Copy(out, in); _ = out.Close() })
			f.wg.Go(func() { _, _ = io.Copy(in, out); _ = in.Close() })
		}
	})
}

// stop closes the listener and waits for the relays, which end as their clients close.
func (f *forwarder) stop() {
	if f.ln != nil {
		_ = f.ln.Close()
	}
	f.wg.Wait()
}

// TestSinkWaitsForMySQL: a sink started while MySQL is down (nothing listens at its address)
// does not exit: it retries with backoff, /readyz says it waits for MySQL, and once MySQL
// answers it migrates, joins Kafka and stores the orders that waited.
func TestSinkWaitsForMySQL(t *testing.T) {
	cfg := newConfig(t, func(c *conf.Config) { c.Sink.RetryMin, c.Sink.RetryMax = 50*time.Millisecond, 400*time.Millisecond })
	s := startProxy(t, cfg, true)
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("sinkwait")
	s.sale(t, c, sku, 10)
	for _, uid := range []string{"u1", "u2", "u3"} {
		if err := c.Do(ctx, "seckill.buy", sku, uid).Err(); err != nil {
			t.Fatal(err)
		}
	}

	dsn, err := mysql.ParseDSN(cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	fwd := newForwarder(t, dsn.Addr)
	dsn.Addr = fwd.addr
	scfg := cfg
	scfg.MySQL.DSN = dsn.FormatDSN()
	db, err := schema.Open(scfg.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	testenv.Kafka(t)
	rc := connect.Redis(scfg.Redis)
	snk := sink.NewSink(scfg, db, rc, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- snk.Run(sctx, func(ctx context.Context) error { _, err := schema.Migrate(ctx, db, zap.NewNop()); return err })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("sink: %v", err)
		}
		_ = rc.Close()
	})
	admin := snk.AdminHandler()
	ready := func() (int, string) {
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	eventually(t, 10*time.Second, "the sink retries MySQL", func() bool { return snk.Stats().Retries >= 3 })
	select {
	case err := <-done:
		t.Fatalf("the sink exited while MySQL was down: %v", err)
	default:
	}
	if code, body := ready(); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "waiting for mysql") {
		t.Fatalf("/readyz while MySQL is down: %d %q", code, body)
	}

	fwd.start(t)
	eventually(t, 30*time.Second, "the sink drains once MySQL is back", func() bool {
		var n int
		_ = s.db.QueryRow(`SELECT COUNT(*) FROM seckill_orders WHERE sku = ? AND status = 'confirmed'`, sku).Scan(&n)
		return n == 3
	})
	if code, body := ready(); code != http.StatusOK || !strings.Contains(body, cfg.Kafka.Topic) {
		t.Fatalf("/readyz once consuming: %d %q", code, body)
	}
}
