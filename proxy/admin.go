package proxy

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"
)

// AdminHandler serves the admin HTTP port:
//   - /metrics: the metrics (see Metrics), when the server has them;
//   - /sale and /sale.json: the live sale page and its data (see salepage.go), with them;
//   - /livez: 200 while the process serves HTTP;
//   - /readyz: 200 when every event loop runs a function posted to it, ready (nil: always)
//     answers nil, both within a second, and the server is not draining; 503 with the reason
//     otherwise;
//   - /healthz: 200 until the server drains (kept for existing probes);
//   - Go's profiler under /debug/pprof/.
func (s *Server) AdminHandler(ready func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	if s.metrics != nil {
		mux.Handle("/metrics", s.metrics.Handler())
		mux.HandleFunc("/sale", salePage)
		mux.HandleFunc("/sale.json", s.metrics.saleJSON)
	}
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.isDraining() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := s.loopsTurning(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if ready != nil {
			if err := ready(ctx); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if s.isDraining() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// loopsTurning returns nil if every event loop turns before ctx ends (loop.turning).
func (s *Server) loopsTurning(ctx context.Context) error {
	s.mu.Lock()
	loops := s.loopGroup
	s.mu.Unlock()
	for _, l := range loops {
		if err := l.turning(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}
