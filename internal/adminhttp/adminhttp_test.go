package adminhttp

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestGuard(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served")) })
	for _, tt := range []struct {
		name, token, method, path, remote string
		header                            map[string]string
		want                              int
	}{
		{"a probe, from anywhere", "tok", "GET", "/readyz", "10.0.0.1:1", nil, 200},
		{"metrics, from anywhere", "", "GET", "/metrics", "10.0.0.1:1", nil, 200},
		{"pprof without the token", "tok", "GET", "/debug/pprof/heap", "127.0.0.1:1", nil, 401},
		{"pprof with a wrong token", "tok", "GET", "/debug/pprof/heap", "127.0.0.1:1", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"pprof with the token", "tok", "GET", "/debug/pprof/heap", "10.0.0.1:1", map[string]string{"Authorization": "Bearer tok"}, 200},
		{"the sale data, no token set, from the network", "", "GET", "/sale.json", "10.0.0.1:1", nil, 401},
		{"the sale data, no token set, from loopback", "", "GET", "/sale.json", "127.0.0.1:1", nil, 200},
		{"reload with the token", "tok", "POST", "/reload", "10.0.0.1:1", map[string]string{"Authorization": "Bearer tok"}, 200},
		{"reload as basic auth", "tok", "POST", "/reload", "10.0.0.1:1", map[string]string{"Authorization": "Basic dG9rOnRvaw=="}, 401},
		{"a cross-site form post to reload, from a browser on loopback", "", "POST", "/reload", "127.0.0.1:1",
			map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"}, 403},
		{"a cross-origin post with the token", "tok", "POST", "/reload", "10.0.0.1:1",
			map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer tok"}, 403},
		{"a POST to a probe path is not a probe", "tok", "POST", "/metrics", "10.0.0.1:1", nil, 401},
		{"the sale data, no token set, a DNS-rebound name", "", "GET", "/sale.json", "127.0.0.1:1", map[string]string{"Host": "evil.example:6381"}, 401},
		{"pprof, no token set, a rebound name without a port", "", "GET", "/debug/pprof/heap", "127.0.0.1:1", map[string]string{"Host": "rebind.example"}, 401},
		{"the sale data, no token set, as localhost", "", "GET", "/sale.json", "127.0.0.1:1", map[string]string{"Host": "localhost:6381"}, 200},
		{"the sale data, no token set, as [::1]", "", "GET", "/sale.json", "[::1]:1", map[string]string{"Host": "[::1]:6381"}, 200},
		{"the sale data with the token, any name", "tok", "GET", "/sale.json", "10.0.0.1:1", map[string]string{"Host": "sidecar.svc:6381", "Authorization": "Bearer tok"}, 200},
		{"a probe, a rebound name", "", "GET", "/livez", "127.0.0.1:1", map[string]string{"Host": "evil.example"}, 200},
	} {
		req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(""))
		req.RemoteAddr = tt.remote
		req.Host = "127.0.0.1:6381"
		if h, ok := tt.header["Host"]; ok {
			req.Host = h
		}
		for k, v := range tt.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		Guard(tt.token, next).ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%s: %d %q, want %d", tt.name, rec.Code, rec.Body.String(), tt.want)
		}
	}
}

func TestServerTimeouts(t *testing.T) {
	s := Server("127.0.0.1:0", http.NotFoundHandler(), zap.NewNop())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Fatalf("a timeout or bound is unset: %+v", s)
	}
}

// TestProbesOutliveAFlood: with more than MaxConns connections held open by others, idle or
// sending their headers slowly, every probe is still answered within a second. Before, 64 idle
// connections took every slot for 30 s, and /livez answered 0 of 20: the sidecar's liveness
// probe failed and it was restarted.
func TestProbesOutliveAFlood(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Server(ln.Addr().String(), Guard("", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})), zap.NewNop())
	done := make(chan error, 1)
	go func() { done <- Serve(srv, ln, nil) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	addr := ln.Addr().String()
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	for i := range 2 * MaxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if i%2 == 1 { // half of them slow: a request line, and no end to the headers
			if _, err := c.Write([]byte("GET /livez HTTP/1.1\r\nHost: x\r\n")); err != nil {
				t.Fatal(err)
			}
		}
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 20 {
		res, err := client.Get("http://" + addr + "/livez")
		if err != nil {
			t.Fatalf("probe %d of 20 beside %d held connections: %v", i+1, len(held), err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("probe %d: %s", i+1, res.Status)
		}
		// The flood goes on: a new idle connection after each probe.
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
}

// TestAdmitEvictsTheLongestWaiting: a full table makes room by closing the connection that
// has waited longest unserved, never one being served; with every one served, it refuses.
func TestAdmitEvictsTheLongestWaiting(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tab := &connTable{max: 3, conns: map[net.Conn]*connEntry{}}
	var cs []net.Conn
	for range 5 {
		a, b := net.Pipe()
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		cs = append(cs, a)
	}
	for i, c := range cs[:3] {
		if !tab.admit(c, t0.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("conn %d refused with room", i)
		}
	}
	tab.serving(tab.conns[cs[0]], true, false) // the oldest is being served: not a victim
	if !tab.admit(cs[3], t0.Add(10*time.Second)) {
		t.Fatal("conn 3 refused with an unserved one to close")
	}
	if _, ok := tab.conns[cs[1]]; ok || tab.conns[cs[0]] == nil {
		t.Fatalf("evicted the wrong one: %v", tab.conns)
	}
	tab.serving(tab.conns[cs[2]], true, false)
	tab.serving(tab.conns[cs[3]], true, false)
	if tab.admit(cs[4], t0.Add(11*time.Second)) {
		t.Fatal("admitted past the bound with every connection served")
	}
}

// TestAdmitEvictsSlowReaders: with every connection busy, the one serving an open path for
// longest past SlowServe (a reader that does not read) is closed to make room; with none, a
// new one is let in for the probes only, up to the reserve, then refused.
func TestAdmitEvictsSlowReaders(t *testing.T) {
	tab := &connTable{max: 2, reserve: 1, conns: map[net.Conn]*connEntry{}}
	var cs []net.Conn
	for range 5 {
		a, b := net.Pipe()
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		cs = append(cs, a)
	}
	now := time.Now()
	for _, c := range cs[:2] {
		if !tab.admit(c, now) {
			t.Fatal("refused with room")
		}
	}
	tab.serving(tab.conns[cs[0]], true, true)  // metrics, its reader not reading
	tab.serving(tab.conns[cs[1]], true, false) // a profile, with the token
	if !tab.admit(cs[2], now.Add(SlowServe/2)) || !tab.conns[cs[2]].reserved {
		t.Fatal("a connection within SlowServe of busy ones was not let in for the probes")
	}
	tab.serving(tab.conns[cs[2]], true, true) // a probe, being answered
	if tab.admit(cs[3], now.Add(SlowServe/2)) {
		t.Fatal("admitted past the reserve with no slow reader to close")
	}
	if !tab.admit(cs[4], now.Add(2*SlowServe)) || tab.conns[cs[4]].reserved {
		t.Fatal("a slow reader was not closed to make room")
	}
	if _, ok := tab.conns[cs[0]]; ok || tab.conns[cs[1]] == nil {
		t.Fatalf("closed the wrong one: %v", tab.conns)
	}
}

// TestProbesOutliveNonReaders: 2 x MaxConns connections that pipeline GET /metrics and never
// read the replies, from one peer, do not keep /livez from being answered, each probe within
// a second. Before, 64 such connections made /livez fail 60 of 60 times in 30 s: a handler
// blocked writing to a reader that never reads counted as served, for up to 2 minutes.
func TestProbesOutliveNonReaders(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1<<20)
	srv := Server(ln.Addr().String(), Guard("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			_, _ = w.Write([]byte(big))
			return
		}
		_, _ = w.Write([]byte("ok"))
	})), zap.NewNop())
	done := make(chan error, 1)
	go func() { done <- Serve(srv, ln, nil) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	addr := ln.Addr().String()
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	flood := func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write([]byte(strings.Repeat("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 64)))
	}
	for range 2 * MaxConns {
		flood()
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 30 {
		res, err := client.Get("http://" + addr + "/livez")
		if err != nil {
			t.Fatalf("probe %d of 30 beside %d non-reading connections: %v", i+1, len(held), err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("probe %d: %s", i+1, res.Status)
		}
		for range 4 {
			flood()
		}
	}
}

// TestProbesOutliveChurn: under a churn of empty connections (opened, then left or closed,
// by 8 goroutines, some 8,000 a second), over HTTP and over HTTPS, every probe is answered; and
// the server's error log (a TLS handshake error for each connection) says so at most once a
// second. Before, HTTPS /livez answered 11 of 31 under 131,000 such connections in 20 s, and
// the log had a line for each.
func TestProbesOutliveChurn(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[withTLS], func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var lines atomic.Int64
			srv := Server(ln.Addr().String(), Guard("", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte("ok"))
			})), zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(countingWriter{&lines}), zap.DebugLevel)))
			client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			scheme := "http"
			var tc *tls.Config
			if withTLS {
				cert := httptest.NewTLSServer(http.NotFoundHandler())
				tc = &tls.Config{Certificates: cert.TLS.Certificates}
				client.Transport = &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a test's own certificate
				cert.Close()
				scheme = "https"
			}
			done := make(chan error, 1)
			go func() { done <- Serve(srv, ln, tc) }()
			t.Cleanup(func() {
				_ = srv.Close()
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
			addr := ln.Addr().String()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					var held []net.Conn
					defer func() {
						for _, c := range held {
							_ = c.Close()
						}
					}()
					tick := time.NewTicker(time.Millisecond)
					defer tick.Stop()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						case <-tick.C:
						}
						c, err := net.Dial("tcp", addr)
						if err != nil {
							continue
						}
						if (i+g)%2 == 0 && len(held) < 200 {
							held = append(held, c) // left open, saying nothing
						} else {
							_ = c.Close()
						}
					}
				})
			}
			answered := 0
			for range 20 {
				time.Sleep(50 * time.Millisecond)
				res, err := client.Get(scheme + "://" + addr + "/livez")
				if err == nil {
					_ = res.Body.Close()
					if res.StatusCode == http.StatusOK {
						answered++
					}
				} else {
					t.Log(err)
				}
			}
			close(stop)
			wg.Wait()
			if answered != 20 {
				t.Errorf("%d of 20 probes answered under the churn", answered)
			}
			if n := lines.Load(); n > 5 {
				t.Errorf("the error log has %d lines for 1 s of churn", n)
			}
		})
	}
}

type countingWriter struct{ n *atomic.Int64 }

func (w countingWriter) Write(p []byte) (int, error) { w.n.Add(1); return len(p), nil }
