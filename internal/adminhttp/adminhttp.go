// Package adminhttp serves a binary's admin HTTP port safely: probes and metrics open to any
// peer, everything else (reloading, profiles, the live sale page) only with the admin token,
// never from a cross-site browser request nor through a DNS-rebound name, with timeouts on
// every connection and a bound on how many are open that no one can starve the probes with. It
// does not know the handlers it serves; the binaries hand them in.
package adminhttp

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// MaxConns bounds the admin port's open connections, so that idle or slow ones never take
// the file descriptors that RESP clients need. A connection past it does not wait: the one
// that has waited longest without a request being served (idle, or still sending its
// headers) is closed to make room, else the one that has been serving an open path (a probe,
// the metrics) for longest past SlowServe, since those take milliseconds unless their peer does
// not read. When every connection is busy otherwise (profiles, reloads of an operator with the
// token), up to ProbeConns more are let in that serve only the probes, so that the kubelet's
// liveness probe is answered whatever else the port is doing.
const (
	MaxConns   = 64
	ProbeConns = 8
)

// SlowServe is how long an open path's request may take before its connection may be closed
// to make room for another: a reader that does not read.
const SlowServe = time.Second

// OpenWriteTimeout bounds the writing of an open path's reply (a probe's, the metrics'): a
// peer that does not read is cut off after it, where a profile (with the token) has
// WriteTimeout.
const OpenWriteTimeout = 5 * time.Second

// MaxPeerInFlight bounds the metrics requests one peer address has in flight; past it, 429
// Too Many Requests. A Prometheus scrapes one at a time. The probes, which cost nothing, are
// not counted.
const MaxPeerInFlight = 4

// IdleTimeout is how long a kept-alive admin connection may wait for its next request.
const IdleTimeout = 5 * time.Second

// Open are the paths any peer may read: the probes and the metrics.
var Open = []string{"/livez", "/readyz", "/healthz", "/metrics"}

// Probes are the paths a reserved connection serves (see ProbeConns).
var Probes = []string{"/livez", "/readyz", "/healthz"}

// openRead says whether r reads an open path (or, with probes, a probe).
func openRead(r *http.Request, probes bool) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	paths := Open
	if probes {
		paths = Probes
	}
	for _, p := range paths {
		if r.URL.Path == p {
			return true
		}
	}
	return false
}

// Guard wraps next: a path in Open is served to anyone; any other path needs the header
// "Authorization: Bearer <token>", or, when token is empty, a peer on loopback. A browser's
// cross-origin request that is not a plain read (a form posted to /reload from another site)
// is refused whatever it carries. Safe for concurrent use.
func Guard(token string, next http.Handler) http.Handler {
	open := http.NewServeMux()
	for _, p := range Open {
		open.Handle(p, next)
	}
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed(token, r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="seckill admin"`)
			msg := "this admin path needs Authorization: Bearer <admin_token>"
			if token == "" {
				msg = "this admin path is served to loopback peers only while admin_token is unset"
			}
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
	cop := http.NewCrossOriginProtection()
	protected := cop.Handler(guarded)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := open.Handler(r); pattern != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		protected.ServeHTTP(w, r)
	})
}

// allowed: r carries the token, or there is none and r comes from loopback, naming a
// loopback host: a page in a browser on the host whose name was rebound to 127.0.0.1
// (DNS rebinding) sends its own name as Host, and is refused.
func allowed(token string, r *http.Request) bool {
	if token == "" {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		ip := net.ParseIP(host)
		return err == nil && ip != nil && ip.IsLoopback() && loopbackHost(r.Host)
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// loopbackHost: a Host header that names loopback: a loopback address, or localhost.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return strings.EqualFold(host, "localhost")
}

// Server is an http.Server for the admin port at addr: headers within 5 s, a request within
// 10 s, a reply within 2 min (a CPU profile takes 30 s), idle connections closed after
// IdleTimeout, headers of at most 64 KiB.
// The server's own error lines (a TLS handshake that failed, one for each connection a
// scanner opens and drops) go to log at most once a second, with how many were left out.
func Server(addr string, h http.Handler, log *zap.Logger) *http.Server {
	w := &rareLines{log: log, s: rate.Sometimes{Interval: time.Second}}
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: IdleTimeout, MaxHeaderBytes: 64 << 10,
		ErrorLog: stdlog.New(w, "", 0)}
}

// rareLines writes what the server logs to log, a line a second at most.
type rareLines struct {
	log     *zap.Logger
	s       rate.Sometimes
	dropped atomic.Int64
}

func (w *rareLines) Write(p []byte) (int, error) {
	logged := false
	w.s.Do(func() {
		logged = true
		w.log.Warn("admin port: "+strings.TrimSpace(string(p))+" (logged at most once a second)", zap.Int64("lines_left_out", w.dropped.Swap(0)))
	})
	if !logged {
		w.dropped.Add(1)
	}
	return len(p), nil
}

// ListenAndServe serves srv on its address until srv is closed (then it returns nil); see
// Serve. With tc, over HTTPS (admin_tls): the handshake is bounded by the server's
// ReadHeaderTimeout, as the headers are.
func ListenAndServe(srv *http.Server, tc *tls.Config) error {
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return err
	}
	return Serve(srv, ln, tc)
}

// Serve serves srv on ln (with tc, over TLS) with at most MaxConns connections open at once,
// and ProbeConns more for the probes (see MaxConns), until srv is closed (then it returns
// nil). An open path's reply must be written within OpenWriteTimeout, and a peer may have
// MaxPeerInFlight of them in flight. It sets srv's ConnState and ConnContext, and wraps its
// Handler.
func Serve(srv *http.Server, ln net.Listener, tc *tls.Config) error {
	t := &connTable{max: MaxConns, reserve: ProbeConns, conns: map[net.Conn]*connEntry{}}
	p := &peers{inFlight: map[string]int{}}
	next := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		open := openRead(r, false)
		e, _ := r.Context().Value(connKey{}).(*connEntry)
		if e != nil {
			if e.reserved && !openRead(r, true) {
				w.Header().Set("Connection", "close")
				http.Error(w, "the admin port is full: this connection serves only the probes", http.StatusServiceUnavailable)
				return
			}
			t.serving(e, true, open)
			defer t.serving(e, false, false)
		}
		if open {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(OpenWriteTimeout))
		}
		if open && !openRead(r, true) {
			peer, _, _ := net.SplitHostPort(r.RemoteAddr)
			if !p.take(peer) {
				w.Header().Set("Connection", "close")
				http.Error(w, "too many requests in flight from this peer", http.StatusTooManyRequests)
				return
			}
			defer p.done(peer)
		}
		next.ServeHTTP(w, r)
	})
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		t.mu.Lock()
		e := t.conns[c]
		t.mu.Unlock()
		return context.WithValue(ctx, connKey{}, e)
	}
	srv.ConnState = t.state
	err := srv.Serve(&evictingListener{Listener: ln, t: t, tc: tc})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
