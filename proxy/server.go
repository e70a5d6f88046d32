package proxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/router"
	"seckill-proxy/upstream"
)

// ErrTooManyClients is the reply to a connection past limits.max_clients.
var ErrTooManyClients = errors.New("ERR max number of clients reached")

// errShuttingDown is the reply to a command that arrives while the proxy drains.
var errShuttingDown = errors.New("UNAVAILABLE proxy is shutting down")

// Server serves RESP on one listener. Build it with New, start it with Serve, and stop it
// with Shutdown. It is safe for concurrent use.
type Server struct {
	router   *router.Router
	upstream *upstream.Cluster // nil: no subscriber mode
	log      *zap.Logger
	limits   conf.Limits

	// ctx is passed to every command; cancel ends calls in flight (hard stop only).
	ctx    context.Context
	cancel context.CancelFunc

	clients atomic.Int64
	// outcomeChannels counts the outcome channels held, outcomeRefused those refused past
	// limits.outcome_channels_per_conn or limits.outcome_channels.
	outcomeChannels, outcomeRefused atomic.Int64
	// replies bounds the replies the event loops' clients have not read (limits.reply_buffers)
	replies replyBudget
	// outcomeShares bounds the outcome channels of each user and source address
	// (limits.client_share of limits.outcome_channels).
	outcomeShares *guard.Shares
	conns         sync.WaitGroup // clients served by a goroutine of their own

	loops     int     // event loops to serve clients from; 0: a goroutine per client
	noLoop    bool    // serve every client from a goroutine of its own
	loopGroup []*loop // set while the event loops serve
	// buys runs the buys the router serves on goroutines (buyshell.go); nil: no guard, or no
	// upstream to buy on.
	buys *buyShell

	mu       sync.Mutex
	ln       net.Listener
	tlsLn    net.Listener          // tls_listen's (ServeTLS)
	open     map[net.Conn]struct{} // clients served by a goroutine of their own
	draining bool
	stopping bool
	inflight int
	drained  chan struct{} // closed when draining and inflight reaches 0

	metrics *Metrics // nil: none
	mem     *memReleaser
	// asks bounds the replies that goroutine-served clients' batches asked for and have not
	// written yet (askshared.go).
	asks *sharedAsk
	// handshakes counts the TLS connections whose handshake is under way (MaxHandshakes).
	handshakes atomic.Int64
	acceptLog  rate.Sometimes
}

// UseMetrics has the server record into m; call it before Serve.
func (s *Server) UseMetrics(m *Metrics) { s.metrics = m }

// New returns a server that hands every command to r, and subscribers to up (nil: none).
func New(r *router.Router, up *upstream.Cluster, log *zap.Logger, limits conf.Limits) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{router: r, upstream: up, log: log, limits: limits, ctx: ctx, cancel: cancel,
		open: map[net.Conn]struct{}{}, drained: make(chan struct{}), loops: 1, mem: newMemReleaser(),
		outcomeShares: guard.NewShares(int(limits.ClientShare*float64(limits.OutcomeChannels)), limits.OutcomeChannels),
		replies:       replyBudget{limit: int64(limits.ReplyBuffers), log: rate.Sometimes{Interval: time.Second}},
		asks:          newSharedAsk(int64(limits.ReplyBuffers)), acceptLog: rate.Sometimes{Interval: time.Second}}
}

// UseEventLoops says how many event loops serve the clients (on Linux; 1 by default), or, with
// 0, that each client is served by a goroutine of its own. Call it before Serve.
func (s *Server) UseEventLoops(n int) { s.loops, s.noLoop = n, n <= 0 }

// Serve accepts connections on ln until Shutdown. It returns nil after a Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	draining := s.draining
	s.mu.Unlock()
	if draining {
		return ln.Close()
	}
	s.startBuys()
	if ok, err := s.serveLoop(ln); ok {
		return err
	}
	s.log.Info("serving RESP", zap.String("addr", ln.Addr().String()))
	return s.serveGoroutines(ln, nil)
}

// startBuys starts the core that runs the buys the router serves (once).
func (s *Server) startBuys() {
	g := s.router.Guard()
	if g == nil || s.upstream == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buys == nil {
		s.buys = newBuyShell(s, g)
		s.router.SetBuyEngine(s.buys)
	}
}

// Clients is the number of connected clients.
func (s *Server) Clients() int64 { return s.clients.Load() }

// admit counts a new client, unless the server drains or is full.
func (s *Server) admit() error {
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	if draining {
		return errShuttingDown
	}
	if s.clients.Add(1) > int64(s.limits.MaxClients) {
		s.clients.Add(-1)
		return ErrTooManyClients
	}
	return nil
}

// begin counts a batch in flight, unless the server drains.
func (s *Server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.inflight++
	return true
}

func (s *Server) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	if s.draining && s.inflight == 0 {
		close(s.drained)
	}
}

// Shutdown stops accepting connections and commands, waits until the batches in flight
// have been answered (or ctx ends, which cancels them), then closes every connection.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		if s.inflight == 0 {
			close(s.drained)
		}
	}
	loops, ln, tlsLn := s.loopGroup, s.ln, s.tlsLn
	s.mu.Unlock()
	s.asks.stop() // a batch that waits for room is not in flight: it goes no more
	if ln != nil {
		_ = ln.Close()
	}
	if tlsLn != nil {
		_ = tlsLn.Close()
	}
	for _, l := range loops {
		l.drain()
	}
	var err error
	select {
	case <-s.drained:
	case <-ctx.Done():
		err = ctx.Err()
		s.cancel()
	}
	for _, l := range loops {
		l.stop()
	}
	s.mu.Lock()
	buys := s.buys
	s.mu.Unlock()
	if buys != nil {
		buys.stop()
	}
	s.mu.Lock()
	s.stopping = true
	for nc := range s.open {
		_ = nc.Close()
	}
	s.mu.Unlock()
	s.cancel() // ends the subscriber bridges
	s.conns.Wait()
	return err
}
