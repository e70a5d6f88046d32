package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/router"
)

// HandshakeTimeout bounds a TLS client's handshake: a client that opens a connection and
// sends nothing holds a goroutine for no longer.
const HandshakeTimeout = 10 * time.Second

// ServeTLS serves clients on ln over TLS (tls_listen, beside the plaintext listener Serve
// serves), until the listener is closed. Each TLS client is served by a goroutine of its own
// whatever redis.event_loops says: Go's TLS reads and writes the socket itself, which an
// event loop cannot poll as its own; its buys go to the same buy engine as every goroutine
// client's.
func (s *Server) ServeTLS(ln net.Listener, cfg *tls.Config) error {
	s.mu.Lock()
	s.tlsLn = ln
	draining := s.draining
	s.mu.Unlock()
	if draining {
		return ln.Close()
	}
	s.startBuys()
	s.log.Info("serving RESP over TLS", zap.String("addr", ln.Addr().String()))
	return s.serveGoroutines(ln, cfg)
}

// serveTLSConn serves a TLS client once its handshake ends within HandshakeTimeout; its
// session is marked TLS, so the cluster facade gives it the TLS address.
func (s *Server) serveTLSConn(tc *tls.Conn, sess *router.Session) {
	sess.TLS = true
	sess.SetConn(tc.LocalAddr().String(), -1, func() { _ = tc.Close() })
	ctx, cancel := context.WithTimeout(s.ctx, HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		s.log.Debug("TLS handshake failed", zap.String("remote", tc.RemoteAddr().String()), zap.Error(err))
		_ = tc.Close()
		s.router.CloseSession(sess)
		s.clients.Add(-1)
		s.conns.Done()
		return
	}
	s.serveConn(tc, sess, nil)
}
