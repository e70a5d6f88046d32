// Command seckill-proxy serves the Redis protocol: SECKILL.* stock commands itself, anything
// else per README.md. It parses flags, loads conf, builds the pieces, runs them, and waits for
// a signal.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/internal/adminhttp"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/schema"
	"seckill-proxy/outbox"
	"seckill-proxy/proxy"
	"seckill-proxy/router"
	"seckill-proxy/sale"
	"seckill-proxy/upstream"
)

// shutdownGrace bounds how long a SIGTERM waits for calls in flight.
const shutdownGrace = 10 * time.Second

// teeCloseGrace bounds how long a SIGTERM then waits for Kafka to take the orders teed.
const teeCloseGrace = 5 * time.Second

func main() { conf.Main("seckill-proxy", run) }

func run(cl *conf.CommandLine, log *zap.Logger) error {
	cfg := cl.Config
	if cl.PrintRedisACL {
		return printRedisACL(os.Stdout, cfg.Redis.PassthroughUsername)
	}
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

	redis.SetLogger(connect.RedisLogger(log))
	rc := connect.Redis(cfg.Redis)
	defer rc.Close()
	host, _ := os.Hostname()
	instance := host + ":" + strconv.Itoa(os.Getpid())
	tee := outbox.NewTee(rc, cfg, instance, log)
	if err := tee.Start(); err != nil {
		return err
	}
	gopt := guard.Options{
		Buy:         cfg.Buy,
		MaxInflight: cfg.Limits.MaxInflight,
		Instance:    instance,
		Publisher:   tee,
		Admission:   cfg.Admission,
		Route:       sale.Route(cfg.Kafka.Topic),
		LateAfter:   cfg.Outbox.LateAfter,
	}
	if cfg.Redis.Mode != conf.ModeStandalone {
		gopt.Topology = connect.NewTopology(cfg.Redis).Masters
	}
	g := guard.New(rc, db, log, gopt)
	defer g.Close()
	sweepCtx, stopSweeper := context.WithCancel(context.Background())
	defer stopSweeper()
	sweeperDone := make(chan struct{})
	sweeper := outbox.NewSweeper(rc, tee, cfg.Outbox, instance, log)
	go func() {
		defer close(sweeperDone)
		sweeper.Run(sweepCtx)
	}()
	passthrough := upstream.FromConf(rc, cfg.Redis)
	defer passthrough.Close()
	// Pass-through waits until the pass-through user is verified; an unfit user stops the proxy.
	unfit := make(chan error, 1)
	go func() {
		if err := passthrough.CheckACL(ctx, log, time.Second); err != nil && ctx.Err() == nil {
			unfit <- fmt.Errorf("redis.passthrough_username: %w", err)
		}
	}()
	var srv *proxy.Server
	var metrics *proxy.Metrics
	r := router.New(g, log, router.Options{
		Upstream:             passthrough,
		Password:             cfg.Password,
		Users:                cfg.Users,
		CompatReplies:        cfg.Buy.CompatReplies,
		Legacy:               cfg.Buy.LegacyScripts,
		LegacyScripts:        cfg.Buy.Legacy,
		LegacyUIDLess:        cfg.Buy.LegacyUIDLess,
		LegacyUIDLessPerConn: int64(cfg.Buy.LegacyUIDLessPerConn),
		MaxArgBytes:          cfg.Limits.MaxArgBytes,
		AdminAllow:           cfg.Redis.AdminAllow,
		AppScripts:           cfg.Redis.AppScripts,
		ProtectedMode:        cfg.ProtectedMode,
		Clients:              func() int64 { return srv.Clients() },
		Extra:                func() []guard.Field { return append(tee.InfoFields(), sweeper.InfoFields()...) },
		ObserveBuy:           func(d time.Duration) { metrics.ObserveBuy(d) },
		ObservePass:          func(args [][]byte, reply []byte, d time.Duration) { metrics.ObservePass(args, reply, d) },
	})
	metrics = proxy.NewMetrics(r.InfoFields, g.SaleMetrics)
	go metrics.RunSampler(ctx, time.Second)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	if cfg.Announce != "" {
		r.SetAnnounce(cfg.Announce)
	} else {
		r.SetAnnounce(ln.Addr().String())
	}
	srv = proxy.New(r, passthrough, log, cfg.Limits)
	srv.UseMetrics(metrics)
	srv.UseEventLoops(cfg.Redis.EventLoops)
	if !cfg.Redis.EventLoop {
		srv.UseEventLoops(0)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	reloader := cl.Reloader(log)
	reloader.Reloadable = map[string]bool{"password": true, "users": true}
	for _, key := range guard.ReloadableAdmission {
		reloader.Reloadable[key] = true
	}
	reloader.Apply = func(next conf.Config) {
		r.SetCredentials(next.Password, next.Users)
		g.SetAdmissionLimits(next.Admission)
	}
	reloader.OnSIGHUP(ctx)
	if cfg.AdminListen != "" {
		admin := adminhttp.Server(cfg.AdminListen, adminhttp.Guard(cfg.AdminToken, reloader.Admin(srv.AdminHandler(func(ctx context.Context) error {
			if err := g.Ping(ctx); err != nil {
				return err
			}
			if cfg.Buy.ReplyAfter == conf.ReplyAfterKafka && !tee.Healthy() {
				return errors.New("kafka is not taking orders (buy.reply_after: kafka)")
			}
			return nil
		}))))
		go func() {
			if err := adminhttp.ListenAndServe(admin); err != nil {
				log.Error("admin HTTP server stopped", zap.Error(err))
			}
		}()
		defer func() { _ = admin.Close() }()
	}

	select {
	case err := <-served:
		return err
	case err := <-unfit:
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
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
	if err := tee.CloseWithin(teeCloseGrace); err != nil && shutdownErr == nil {
		shutdownErr = err
	}
	if shutdownErr != nil {
		return fmt.Errorf("shutdown: %w", shutdownErr)
	}
	log.Info("stopped", zap.Any("tee", tee.Stats()), zap.Any("buys", g.Stats()))
	return nil
}

// printRedisACL writes the pass-through user's ACL rule, one ACL SETUSER argument per line,
// as scripts/redis-passthrough.acl holds it.
func printRedisACL(w io.Writer, user string) error {
	if user == "" {
		user = conf.DefaultPassthroughUser
	}
	_, err := fmt.Fprintf(w, "# The Redis ACL rule of seckill-proxy's pass-through user, one ACL SETUSER argument per line.\n"+
		"# Apply it on every node, replicas too (ACLs are not replicated), e.g. in bash:\n"+
		"#   mapfile -t rule < <(grep -v '^#' redis-passthrough.acl)\n"+
		"#   redis-cli -p <port> ACL SETUSER %s reset on '>PASSWORD' \"${rule[@]}\"\n"+
		"# Made by: seckill-proxy -print-redis-acl\n%s\n",
		user, strings.Join(sale.PassthroughACL(), "\n"))
	return err
}
