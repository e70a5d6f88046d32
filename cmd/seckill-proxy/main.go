// Command seckill-proxy serves the Redis protocol: SECKILL.* stock commands itself, anything
// else per README.md. It parses flags, loads conf, builds the pieces, runs them, and waits for
// a signal.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/internal/schema"
	"seckill-proxy/proxy"
	"seckill-proxy/router"
	"seckill-proxy/sink"
	"seckill-proxy/upstream"
)

// shutdownGrace bounds how long a SIGTERM waits for calls in flight.
const shutdownGrace = 10 * time.Second

func main() { conf.Main("seckill-proxy", run) }

func run(cl *conf.CommandLine, log *zap.Logger) error {
	cfg := cl.Config
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	db, err := schema.Open(cfg.MySQL)
	if err != nil {
		return err
	}
	defer db.Close()
	if cl.Migrate {
		v, err := schema.Migrate(ctx, db, log)
		if err == nil {
			log.Info("schema is up to date", zap.Int64("version", v))
		}
		return err
	}
	if _, err := schema.Migrate(ctx, db, log); err != nil {
		// Buys do not need MySQL; WARM will say it is unavailable until MySQL answers.
		log.Warn("could not apply the MySQL migrations; WARM needs them", zap.Error(err))
	}

	redis.SetLogger(guard.RedisLogger(log))
	rc := guard.NewClusterClient(cfg.Redis)
	defer rc.Close()
	host, _ := os.Hostname()
	instance := host + ":" + strconv.Itoa(os.Getpid())
	tee := sink.NewTee(rc, cfg, instance, log)
	if err := tee.Start(); err != nil {
		return err
	}
	g := guard.New(rc, db, log, guard.Options{
		Buy:         cfg.Buy,
		MaxInflight: cfg.Limits.MaxInflight,
		Instance:    instance,
		Publisher:   tee,
	})
	defer g.Close()
	sweepCtx, stopSweeper := context.WithCancel(context.Background())
	defer stopSweeper()
	sweeperDone := make(chan struct{})
	go func() {
		defer close(sweeperDone)
		sink.NewSweeper(rc, tee, cfg.Outbox, instance, log).Run(sweepCtx)
	}()
	passthrough := upstream.FromConf(rc, cfg.Redis, cfg.Buy.CallTimeout, guard.KeyPrefix)
	defer passthrough.Close()
	var srv *proxy.Server
	r := router.New(g, log, router.Options{
		Upstream:      passthrough,
		Password:      cfg.Password,
		Users:         cfg.Users,
		CompatReplies: cfg.Buy.CompatReplies,
		MaxArgBytes:   cfg.Limits.MaxArgBytes,
		Clients:       func() int64 { return srv.Clients() },
		Extra:         tee.InfoFields,
	})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	srv = proxy.New(r, passthrough, log, cfg.Limits)
	srv.UseEventLoop(cfg.Redis.EventLoop)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if cfg.AdminListen != "" {
		admin := &http.Server{Addr: cfg.AdminListen, Handler: srv.AdminHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := admin.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("admin HTTP server stopped", zap.Error(err))
			}
		}()
		defer func() { _ = admin.Close() }()
	}

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: draining calls in flight")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	<-served
	stopSweeper()
	<-sweeperDone
	// The buys in flight are answered; now flush what the producer holds.
	if err := tee.Close(); err != nil && shutdownErr == nil {
		shutdownErr = err
	}
	if shutdownErr != nil {
		return fmt.Errorf("shutdown: %w", shutdownErr)
	}
	log.Info("stopped", zap.Any("tee", tee.Stats()), zap.Any("buys", g.Stats()))
	return nil
}
