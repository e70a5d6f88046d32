// Package adminhttp serves a binary's admin HTTP port safely: probes and metrics open to any
// peer, everything else (reloading, profiles, the live sale page) only with the admin token,
// never from a cross-site browser request, with timeouts on every connection and a bound on
// how many are open. It does not know the handlers it serves; the binaries hand them in.
package adminhttp

import (
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/netutil"
)

// MaxConns bounds the admin port's open connections, so that idle or slow ones never take
// the file descriptors that RESP clients need.
const MaxConns = 64

// Open are the paths any peer may read: the probes and the metrics.
var Open = []string{"/livez", "/readyz", "/healthz", "/metrics"}

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

// allowed: r carries the token, or there is none and r comes from loopback.
func allowed(token string, r *http.Request) bool {
	if token == "" {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		ip := net.ParseIP(host)
		return err == nil && ip != nil && ip.IsLoopback()
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// Server is an http.Server for the admin port at addr: headers within 5 s, a request within
// 10 s, a reply within 2 min (a CPU profile takes 30 s), idle connections closed after 30 s,
// headers of at most 64 KiB.
func Server(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
}

// ListenAndServe serves srv with at most MaxConns connections open at once, until srv is
// closed (then it returns nil).
func ListenAndServe(srv *http.Server) error {
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return err
	}
	err = srv.Serve(netutil.LimitListener(ln, MaxConns))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
