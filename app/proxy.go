// Package app assembles seckill-proxy from its parts: the one wiring of the Redis client, the
// tee, the guard, the sweeper, pass-through, the router, the metrics and the RESP server,
// used by cmd/seckill-proxy and by every test harness, so that what the tests run is what
// ships.
package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/salescan"
	"seckill-proxy/outbox"
	"seckill-proxy/proxy"
	"seckill-proxy/router"
	"seckill-proxy/sale"
	"seckill-proxy/upstream"
)

// Options are what the assembly takes besides the configuration.
type Options struct {
	Log *zap.Logger
	// DB is MySQL, which WARM reads the stock from; the caller owns it.
	DB *sql.DB
	// Instance names this proxy in the outbox leases and in its orders.
	Instance string
	// NoTee leaves every order in its outbox, as a proxy killed between the script and Kafka
	// does: no tee, no sweeper (tests of the sweeper and of late orders).
	NoTee bool
	// Listener is where the RESP server serves; nil listens on the configuration's listen.
	Listener net.Listener
	// ACLRetry is how often the pass-through user's check is tried again while Redis cannot
	// be asked (default 1 s).
	ACLRetry time.Duration
}

// Proxy is one assembled, running proxy.
type Proxy struct {
	Config  conf.Config
	Log     *zap.Logger
	Redis   *redis.ClusterClient
	Guard   *guard.Guard
	Tee     *outbox.Tee     // nil with Options.NoTee
	Sweeper *outbox.Sweeper // nil with Options.NoTee
	// Pending marks the buckets the buys write to, for the sweeper.
	Pending *salescan.Pending
	Pass    *upstream.Cluster
	Router  *router.Router
	Metrics *proxy.Metrics
	Server  *proxy.Server
	// Addr is where the RESP server listens.
	Addr string
	// TLSAddr is the address of the TLS listener (tls_listen), empty without one.
	TLSAddr string

	done        chan struct{} // closed once the RESP server has stopped
	serveErr    error         // why, set before done is closed
	unfit       chan error
	verified    chan struct{}
	stopSweeper context.CancelFunc
	sweeperDone chan struct{}
	stopCheck   context.CancelFunc
	stopped     bool
}

// Start assembles a proxy on cfg and starts it: the tee, the sweeper, the pass-through user's
// check (pass-through waits for it; Unfit reports an unfit user) and the RESP server.
func Start(cfg conf.Config, opt Options) (*Proxy, error) {
	log := opt.Log
	if log == nil {
		log = zap.NewNop()
	}
	if _, err := connect.RedisTLS(cfg.Redis); err != nil {
		return nil, err
	}
	p := &Proxy{Config: cfg, Log: log, Redis: connect.Redis(cfg.Redis), done: make(chan struct{}),
		unfit: make(chan error, 1), verified: make(chan struct{}), sweeperDone: make(chan struct{})}
	gopt := guard.Options{Buy: cfg.Buy, MaxInflight: cfg.Limits.MaxInflight, Instance: opt.Instance,
		Admission: cfg.Admission, Route: sale.Route(cfg.Kafka.Topic), LateAfter: cfg.Outbox.LateAfter,
		Partitions: cfg.Kafka.Partitions, Status: cfg.Status}
	if cfg.Redis.Mode != conf.ModeStandalone {
		gopt.Topology = connect.NewTopology(cfg.Redis).Masters
	}
	var sweepCtx context.Context
	sweepCtx, p.stopSweeper = context.WithCancel(context.Background())
	// A proxy without a tee (Options.NoTee) writes outbox entries too: it marks them for the others' sweepers.
	p.Pending = salescan.NewPending(p.Redis, gopt.Route, log)
	gopt.Pending = p.Pending
	if opt.NoTee {
		go func() {
			defer close(p.sweeperDone)
			p.Pending.Run(sweepCtx)
		}()
	} else {
		p.Tee = outbox.NewTee(p.Redis, cfg, opt.Instance, log)
		if err := p.Tee.Start(); err != nil {
			_ = p.Redis.Close()
			return nil, err
		}
		gopt.Publisher = p.Tee
	}
	p.Guard = guard.New(p.Redis, opt.DB, log, gopt)
	if !opt.NoTee {
		p.Sweeper = outbox.NewSweeper(p.Redis, p.Tee, cfg.Outbox, opt.Instance, p.Guard, log)
		p.Sweeper.FenceWith(p.Guard.ReplicasToWait)
		go func() {
			defer close(p.sweeperDone)
			var marks sync.WaitGroup
			marks.Go(func() { p.Pending.Run(sweepCtx) })
			p.Sweeper.Run(sweepCtx)
			marks.Wait()
		}()
	}
	p.Pass = upstream.FromConf(p.Redis, cfg.Redis, log)

	var checkCtx context.Context
	checkCtx, p.stopCheck = context.WithCancel(context.Background())
	retry := opt.ACLRetry
	if retry <= 0 {
		retry = time.Second
	}
	go func() {
		if err := p.Pass.CheckACL(checkCtx, log, retry); err != nil {
			if checkCtx.Err() == nil {
				p.unfit <- fmt.Errorf("redis.passthrough_username: %w", err)
			}
			return
		}
		// The spare connections for blocking commands and transactions (redis.spare_conns),
		// before the proxy says it is ready, so that the first one dials nothing in its path;
		// a failure here is no failure: such a command dials then.
		// The command table too, which tells blocking commands from the rest.
		wctx, cancel := context.WithTimeout(checkCtx, cfg.Redis.DialTimeout+cfg.Redis.CommandTimeout)
		if err := p.Pass.LoadCommands(wctx); err != nil {
			log.Warn("Redis's command table not loaded yet", zap.Error(err))
		}
		if err := p.Pass.WarmSpares(wctx); err != nil {
			log.Warn("spare connections not made; blocking commands and transactions dial their own", zap.Error(err))
		}
		cancel()
		close(p.verified)
	}()

	ropt := router.Options{Upstream: p.Pass, Password: cfg.Password, Users: cfg.Users,
		CompatReplies: cfg.Buy.CompatReplies, Legacy: cfg.Buy.LegacyScripts, LegacyScripts: cfg.Buy.Legacy,
		LegacyUIDLess: cfg.Buy.LegacyUIDLess, LegacyUIDLessPerConn: int64(cfg.Buy.LegacyUIDLessPerConn),
		MaxArgBytes: cfg.Limits.MaxArgBytes, MaxAllocBytes: cfg.Limits.MaxAllocBytes, MaxChannelBytes: cfg.Limits.MaxChannelBytes, AdminAllow: cfg.Redis.AdminAllow, AppScripts: cfg.Redis.AppScripts, AppScriptFuel: cfg.Redis.AppScriptFuel, AppScriptBytes: cfg.Redis.AppScriptBytes, AppScriptTime: cfg.Redis.AppScriptTime,
		ProtectedMode: cfg.ProtectedMode, MaxStatusWait: cfg.Status.MaxWait,
		WaitShare: int(cfg.Limits.ClientShare * float64(cfg.Status.MaxWaiters)), MaxWaiters: cfg.Status.MaxWaiters,
		Clients:     func() int64 { return p.Server.Clients() },
		ObservePass: func(args [][]byte, reply []byte, d time.Duration) { p.Metrics.ObservePass(args, reply, d) }}
	ropt.Extra = func() []guard.Field {
		var out []guard.Field
		if p.Server != nil {
			out = p.Server.BoundFields()
		}
		if p.Tee != nil {
			out = append(append(out, p.Tee.InfoFields()...), p.Sweeper.InfoFields()...)
		}
		return out
	}
	p.Router = router.New(p.Guard, log, ropt)
	p.Metrics = proxy.NewMetrics(p.Router.InfoFields, p.Guard.SaleMetrics)

	if err := p.serve(cfg, opt.Listener, log); err != nil {
		p.stopSweeper()
		<-p.sweeperDone
		if p.Tee != nil {
			_ = p.Tee.Close()
		}
		p.close()
		return nil, err
	}
	return p, nil
}

// serve starts the RESP server on ln (nil: on listen's address), and on tls_listen if set.
func (p *Proxy) serve(cfg conf.Config, ln net.Listener, log *zap.Logger) error {
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return err
		}
	}
	p.Addr = ln.Addr().String()
	if cfg.Announce != "" {
		p.Router.SetAnnounce(cfg.Announce)
	} else {
		p.Router.SetAnnounce(p.Addr)
	}
	p.Server = proxy.New(p.Router, p.Pass, log, cfg.Limits)
	p.Server.UseMetrics(p.Metrics)
	p.Server.UseEventLoops(cfg.Redis.EventLoops)
	if err := p.serveTLS(cfg, log); err != nil {
		_ = ln.Close()
		return err
	}
	go func() {
		defer close(p.done)
		p.serveErr = p.Server.Serve(ln)
	}()
	return nil
}

// Ready is the readiness probe: Redis answers the guard, and, with buy.reply_after: kafka,
// the tee takes orders.
func (p *Proxy) Ready(ctx context.Context) error {
	if err := p.Guard.Ping(ctx); err != nil {
		return err
	}
	if p.Config.Buy.ReplyAfter == conf.ReplyAfterKafka && (p.Tee == nil || !p.Tee.Healthy()) {
		return errors.New("kafka is not taking orders (buy.reply_after: kafka)")
	}
	return nil
}

// AdminHandler is the admin port's handler (probes, /metrics, pprof, the live sale page),
// before the admin guard.
func (p *Proxy) AdminHandler() http.Handler { return p.Server.AdminHandler(p.Ready) }

// Done is closed once the RESP server has stopped; ServeErr then says why (nil after a
// Shutdown).
func (p *Proxy) Done() <-chan struct{} { return p.done }

// ServeErr is why the RESP server stopped, once Done is closed.
func (p *Proxy) ServeErr() error { return p.serveErr }

// Unfit reports a pass-through user that the proxy must not run with.
func (p *Proxy) Unfit() <-chan error { return p.unfit }

// Verified is closed once the pass-through user is checked and pass-through serves.
func (p *Proxy) Verified() <-chan struct{} { return p.verified }

// Shutdown stops taking clients and drains the calls in flight within ctx, stops the sweeper,
// then gives the tee teeGrace to hand Kafka what it holds, and closes the rest. It may be
// called again; only the first call acts.
func (p *Proxy) Shutdown(ctx context.Context, teeGrace time.Duration) error {
	if p.stopped {
		return nil
	}
	err := p.Server.Shutdown(ctx)
	<-p.done
	if err == nil {
		err = p.serveErr
	}
	p.stopSweeper()
	<-p.sweeperDone
	if p.Tee != nil {
		if terr := p.Tee.CloseWithin(teeGrace); err == nil {
			err = terr
		}
	}
	p.close()
	return err
}

// close releases what Start built, the server aside.
func (p *Proxy) close() {
	p.stopped = true
	p.stopCheck()
	p.stopSweeper()
	if p.Guard != nil {
		p.Guard.Close()
	}
	if p.Pass != nil {
		p.Pass.Close()
	}
	_ = p.Redis.Close()
}
