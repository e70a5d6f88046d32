package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"

	"seckill-proxy/router"
)

// HandshakeTimeout bounds a TLS client's handshake: a client that opens a connection and
// sends nothing holds a goroutine for no longer. A handshake takes a few milliseconds on a
// pod's network; 10 s let 10,000 idle connections hold every client slot.
const HandshakeTimeout = 2 * time.Second

// MaxHandshakes bounds the TLS connections whose handshake has not ended, apart from
// limits.max_clients: a connection takes a client slot only once its handshake is done, so
// that connections that never finish one (no certificate needed for that) cannot lock out
// the clients of the plaintext listener, nor TLS clients past this many at once.
const MaxHandshakes = 256

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
	s.handshakes.Add(-1)
	if err == nil {
		err = s.admit()
		if err != nil {
			_, _ = tc.Write(redcon.AppendError(nil, err.Error()))
		}
	}
	if err != nil {
		s.log.Debug("TLS client not served", zap.String("remote", tc.RemoteAddr().String()), zap.Error(err))
		_ = tc.Close()
		s.router.CloseSession(sess)
		s.conns.Done()
		return
	}
	s.serveConn(tc, sess, nil)
}

// admitHandshake counts a TLS connection whose handshake begins; false: MaxHandshakes are
// under way, and it is closed.
func (s *Server) admitHandshake() bool {
	if s.handshakes.Add(1) > MaxHandshakes {
		s.handshakes.Add(-1)
		return false
	}
	return true
}
