// Command seckill-sink consumes orders from Kafka and persists them into MySQL under the hard
// stock constraint, writing each order's outcome back to Redis. See README.md. It parses flags,
// loads conf, builds the pieces, runs them, and waits for a signal.
package main

import (
	"context"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/internal/adminhttp"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/niceness"
	"seckill-proxy/internal/schema"
	"seckill-proxy/internal/tlsfiles"
	"seckill-proxy/sink"
)

func main() {
	conf.CertificateWarnings = func(c conf.Config) []string { return tlsfiles.Warnings(c, time.Now()) }
	conf.Main("seckill-sink", run)
}

func run(cl *conf.CommandLine, log *zap.Logger) error {
	cfg := cl.Config
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	db, err := schema.Open(cfg.MySQL)
	if err != nil {
		return err
	}
	defer db.Close()
	migrate := func(ctx context.Context) error {
		v, err := schema.Migrate(ctx, db, log)
		if err == nil {
			log.Info("schema is up to date", zap.Int64("version", v))
		}
		return err
	}
	if cl.Migrate {
		return migrate(ctx) // a one-off job fails at once, for its runner to retry
	}
	if n := cfg.Sink.Nice; n > 0 {
		if threads, err := niceness.Lower(n); err != nil {
			log.Warn("cannot lower the sink's CPU priority; it runs as started", zap.Int("nice", n), zap.Error(err))
		} else {
			log.Info("the sink runs at a lower CPU priority", zap.Int("nice", n), zap.Int("threads", threads))
		}
	}
	redis.SetLogger(connect.RedisLogger(log))
	if _, err := connect.RedisTLS(cfg.Redis); err != nil {
		return err
	}
	rc := connect.Redis(cfg.Redis)
	defer rc.Close()
	snk := sink.NewSink(cfg, db, rc, log)
	// SIGHUP or POST /reload reloads log.level; the sink's other settings take a restart.
	reloader := cl.Reloader(log)
	reloader.OnSIGHUP(ctx)
	if cfg.Sink.AdminListen != "" {
		tc, err := tlsfiles.Server("admin_tls", cfg.AdminTLS, log)
		if err != nil {
			return err
		}
		admin := adminhttp.Server(cfg.Sink.AdminListen, adminhttp.Guard(cfg.AdminToken, reloader.Admin(snk.AdminHandler())), log)
		go func() {
			if err := adminhttp.ListenAndServe(admin, tc); err != nil {
				log.Error("admin HTTP server stopped", zap.Error(err))
			}
		}()
		defer func() { _ = admin.Close() }()
	}
	// Run waits for MySQL, Redis and Kafka with a bounded backoff; /readyz says what it waits for.
	return snk.Run(ctx, migrate)
}
