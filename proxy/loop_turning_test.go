//go:build linux

package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReadyzFailsOnFrozenLoop: /readyz answers 503 while an event loop does not run what is
// posted to it (a loop held by one request serves none of its clients, whatever else
// answers), and 200 once it turns again.
func TestReadyzFailsOnFrozenLoop(t *testing.T) {
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(wake)
	l := &loop{wake: wake, done: make(chan struct{})}
	s := &Server{loopGroup: []*loop{l}}
	h := s.AdminHandler(nil)
	probe := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	if code := probe(); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with a loop that does not turn: %d, want 503", code)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the loop turns again: it runs what is posted, as run does
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				l.runPosted()
			}
		}
	}()
	if code := probe(); code != http.StatusOK {
		t.Fatalf("/readyz with the loop turning: %d, want 200", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.mu.Lock()
	l.shut = true
	l.mu.Unlock()
	if err := l.turning(ctx); err == nil {
		t.Fatal("a loop that has ended reported turning")
	}
}
