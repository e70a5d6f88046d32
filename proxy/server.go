package proxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"

	"seckill-proxy/conf"
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
	rs       *redcon.Server
	bridges  sync.WaitGroup // subscriber connections

	// ctx is passed to every command; cancel ends calls in flight (hard stop only).
	ctx    context.Context
	cancel context.CancelFunc

	clients atomic.Int64

	noLoop bool  // serve a standalone upstream with redcon too
	loop   *loop // set while the event loop serves

	mu       sync.Mutex
	draining bool
	inflight int
	drained  chan struct{} // closed when draining and inflight reaches 0
}

// New returns a server that hands every command to r, and subscribers to up (nil: none).
func New(r *router.Router, up *upstream.Cluster, log *zap.Logger, limits conf.Limits) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{router: r, upstream: up, log: log, limits: limits, ctx: ctx, cancel: cancel, drained: make(chan struct{})}
	s.rs = redcon.NewServerNetwork("tcp", "", s.handle, s.accept, s.closed)
	return s
}

// UseEventLoop says whether a standalone upstream's clients are served from an event loop
// (the default, on Linux) or, like a cluster's, by redcon with a goroutine per client. Call it
// before Serve.
func (s *Server) UseEventLoop(on bool) { s.noLoop = !on }

// Serve accepts connections on ln until Shutdown. It returns nil after a Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if ok, err := s.serveLoop(ln); ok {
		return err
	}
	s.log.Info("serving RESP", zap.String("addr", ln.Addr().String()))
	// The largest argument, plus room for a pipeline's other commands.
	return s.rs.Serve(limitedListener{Listener: ln, max: int64(s.limits.MaxArgBytes) + 1<<20})
}

// Clients is the number of connected clients.
func (s *Server) Clients() int64 { return s.clients.Load() }

func (s *Server) accept(conn redcon.Conn) bool {
	if hc := handedOf(conn.NetConn()); hc != nil { // counted already, and has its session
		conn.SetContext(hc.sess)
		return true
	}
	if err := s.admit(); err != nil {
		conn.WriteError(err.Error())
		return false
	}
	conn.SetContext(s.router.NewSession())
	return true
}

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

func (s *Server) closed(conn redcon.Conn, err error) {
	if sess, ok := conn.Context().(*router.Session); ok {
		s.clients.Add(-1)
		s.router.CloseSession(sess)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("client connection ended", zap.String("remote", conn.RemoteAddr()), zap.Error(err))
	}
}

// handle serves the first command of a client read, and with it the rest of that read's
// pipeline, so that the router can send it upstream as one batch; redcon flushes all the
// replies in one write afterwards.
func (s *Server) handle(conn redcon.Conn, first redcon.Command) {
	sess := conn.Context().(*router.Session)
	if !s.begin() {
		conn.WriteError(errShuttingDown.Error())
		conn.Close()
		return
	}
	defer s.end()
	defer func() {
		// A bug in one command must not take every client down: drop this one, log why.
		if p := recover(); p != nil {
			s.log.Error("command panicked; closing its connection", zap.Any("panic", p), zap.String("remote", conn.RemoteAddr()))
			conn.Close()
		}
	}()
	took(conn.NetConn())
	rest := conn.ReadPipeline()
	cmds := make([][][]byte, 0, 1+len(rest))
	cmds = append(cmds, first.Args)
	for _, c := range rest {
		cmds = append(cmds, c.Args)
	}
	for len(cmds) > 0 && !sess.Quit && sess.Subscribe == nil {
		n := min(len(cmds), s.limits.MaxPipeline)
		s.router.Serve(s.ctx, sess, cmds[:n], conn)
		cmds = cmds[n:]
	}
	switch {
	case sess.Quit:
		conn.Close()
	case sess.Subscribe != nil && s.upstream != nil:
		s.subscribe(conn, sess)
	}
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
	l := s.loop
	s.mu.Unlock()
	if l != nil {
		l.drain()
	}
	var err error
	select {
	case <-s.drained:
	case <-ctx.Done():
		err = ctx.Err()
		s.cancel()
	}
	if l != nil {
		_ = s.rs.Close() // serves the loop's subscribers, if it got to serve at all
		l.stop()
	} else if cerr := s.rs.Close(); cerr != nil && err == nil {
		err = cerr
	}
	s.cancel() // ends the subscriber bridges
	s.bridges.Wait()
	return err
}
