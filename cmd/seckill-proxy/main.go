// Command seckill-proxy serves the Redis protocol: SECKILL.* stock commands itself, anything
// else per README.md. It parses flags, loads conf, builds the pieces, runs them, and waits for
// a signal.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/app"
	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/internal/adminhttp"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/schema"
	"seckill-proxy/internal/tlsfiles"
	"seckill-proxy/sale"
)

// shutdownGrace bounds how long a SIGTERM waits for calls in flight.
const shutdownGrace = 10 * time.Second

// teeCloseGrace bounds how long a SIGTERM then waits for Kafka to take the orders teed.
const teeCloseGrace = 5 * time.Second

// shutdownSlack is what a shutdown may take beyond both graces before the process exits
// regardless.
const shutdownSlack = 5 * time.Second

func main() {
	conf.CertificateWarnings = func(c conf.Config) []string { return tlsfiles.Warnings(c, time.Now()) }
	conf.Main("seckill-proxy", run)
}

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
	host, _ := os.Hostname()
	p, err := app.Start(cfg, app.Options{Log: log, DB: db, Instance: host + ":" + strconv.Itoa(os.Getpid())})
	if err != nil {
		return err
	}
	go p.Metrics.RunSampler(ctx, time.Second)
	reloader := cl.Reloader(log)
	reloader.Reloadable = map[string]bool{"password": true, "users": true}
	for _, key := range guard.ReloadableAdmission {
		reloader.Reloadable[key] = true
	}
	reloader.Apply = func(next conf.Config) {
		p.Router.SetCredentials(next.Password, next.Users)
		p.Guard.SetAdmissionLimits(next.Admission)
	}
	reloader.OnSIGHUP(ctx)
	if cfg.AdminListen != "" {
		tc, err := tlsfiles.Server("admin_tls", cfg.AdminTLS, log)
		if err != nil {
			return err
		}
		admin := adminhttp.Server(cfg.AdminListen, adminhttp.Guard(cfg.AdminToken, reloader.Admin(p.AdminHandler())), log)
		go func() {
			if err := adminhttp.ListenAndServe(admin, tc); err != nil {
				log.Error("admin HTTP server stopped", zap.Error(err))
			}
		}()
		defer func() { _ = admin.Close() }()
	}

	var cause error
	select {
	case <-p.Done():
		cause = p.ServeErr()
	case cause = <-p.Unfit():
	case <-ctx.Done():
		log.Info("shutting down: draining calls in flight")
	}
	// A second signal stops the process at once (the default action, restored), and so does
	// a shutdown that overruns its own bounds: a SIGTERM always ends it. The outbox holds every
	// order told, so the sweepers of the other proxies, or this one's restart, publish it.
	stop()
	watchdog := time.AfterFunc(shutdownGrace+teeCloseGrace+shutdownSlack, func() {
		log.Error("shutdown overran its bounds; exiting now", zap.Duration("after", shutdownGrace+teeCloseGrace+shutdownSlack))
		_ = log.Sync()
		os.Exit(1)
	})
	defer watchdog.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// The buys in flight are answered, then the tee hands Kafka what it holds.
	shutdownErr := p.Shutdown(sctx, teeCloseGrace)
	if cause != nil {
		return cause
	}
	if shutdownErr != nil {
		return fmt.Errorf("shutdown: %w", shutdownErr)
	}
	log.Info("stopped", zap.Any("tee", p.Tee.Stats()), zap.Any("buys", p.Guard.Stats()))
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
