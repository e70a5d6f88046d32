package adminhttp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
	} {
		req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(""))
		req.RemoteAddr = tt.remote
		req.Host = "127.0.0.1:6381"
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
	s := Server("127.0.0.1:0", http.NotFoundHandler())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Fatalf("a timeout or bound is unset: %+v", s)
	}
}
