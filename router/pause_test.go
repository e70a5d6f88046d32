package router

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/conf"
)

// TestClientPauseArguments: CLIENT PAUSE and UNPAUSE answer Redis's errors to a bad call, and
// an app user may run neither.
func TestClientPauseArguments(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{})
	for _, tt := range []struct{ cmd, want string }{
		{"CLIENT PAUSE", "-ERR wrong number of arguments for 'client|pause' command\r\n"},
		{"CLIENT PAUSE 1 ALL x", "-ERR wrong number of arguments for 'client|pause' command\r\n"},
		{"CLIENT PAUSE soon", "-ERR timeout is not an integer or out of range\r\n"},
		{"CLIENT PAUSE -1", "-ERR timeout is not an integer or out of range\r\n"},
		{"CLIENT PAUSE 99999999999999999999", "-ERR timeout is not an integer or out of range\r\n"},
		{"CLIENT PAUSE 10 SOME", "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n"},
		{"CLIENT UNPAUSE now", "-ERR wrong number of arguments for 'client|unpause' command\r\n"},
	} {
		if got := serve(t, r, r.NewSession("127.0.0.1:1"), tt.cmd); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.cmd, got, tt.want)
		}
	}
	if _, held := r.Paused([][]byte{[]byte("GET"), []byte("k")}, time.Now()); held {
		t.Fatal("a refused CLIENT PAUSE paused the proxy")
	}
	app := New(nil, zap.NewNop(), Options{Users: []conf.User{{Name: "shop", Password: "pw", Role: conf.RoleApp}}})
	if got := serve(t, app, app.NewSession("127.0.0.1:1"), "AUTH shop pw", "CLIENT PAUSE 1000", "CLIENT UNPAUSE"); got != "+OK\r\n"+
		"-NOPERM User shop has no permissions to run the 'client|pause' command\r\n"+
		"-NOPERM User shop has no permissions to run the 'client|unpause' command\r\n" {
		t.Fatalf("app user: %q", got)
	}
	if _, held := app.Paused([][]byte{[]byte("GET"), []byte("k")}, time.Now()); held {
		t.Fatal("an app user paused the proxy")
	}
}

// TestPauseHoldsUntilItsEnd: a pause holds commands until its end (and no longer), a second
// pause keeps the later end and the stronger mode, and UNPAUSE ends it at once: the servers'
// loops are woken and a client waiting in AwaitPause goes on.
func TestPauseHoldsUntilItsEnd(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{})
	s := r.NewSession("127.0.0.1:1")
	get := [][]byte{[]byte("GET"), []byte("k")}
	if got := serve(t, r, s, "CLIENT PAUSE 60000 ALL", "CLIENT PAUSE 10 WRITE"); got != "+OK\r\n+OK\r\n" {
		t.Fatalf("pause: %q", got)
	}
	now := time.Now()
	until, held := r.Paused(get, now)
	if !held || until.Sub(now) < 59*time.Second {
		t.Fatalf("after PAUSE 60000 ALL and PAUSE 10 WRITE: held %v until %v from now", held, until.Sub(now))
	}
	if _, held := r.Paused(get, until); held {
		t.Fatal("held at the pause's end")
	}
	woken := make(chan struct{}, 1)
	r.OnUnpause(func() { woken <- struct{}{} })
	waited := make(chan bool, 1)
	go func() { waited <- r.AwaitPause(context.Background(), [][][]byte{get}) }()
	if got := serve(t, r, s, "CLIENT UNPAUSE"); got != "+OK\r\n" {
		t.Fatalf("unpause: %q", got)
	}
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("UNPAUSE woke no loop")
	}
	select {
	case ok := <-waited:
		if !ok {
			t.Fatal("AwaitPause: false with its context alive")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a client held by the pause still waits after UNPAUSE")
	}
	if _, held := r.Paused(get, time.Now()); held {
		t.Fatal("held after UNPAUSE")
	}
}

// TestAwaitPauseEndsWithItsContext: a client held by a long pause stops waiting when its
// context ends (its connection closed), and a short pause ends by itself.
func TestAwaitPauseEndsWithItsContext(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{})
	s := r.NewSession("127.0.0.1:1")
	get := [][][]byte{{[]byte("GET"), []byte("k")}}
	if got := serve(t, r, s, "CLIENT PAUSE 60000"); got != "+OK\r\n" {
		t.Fatalf("pause: %q", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan bool, 1)
	go func() { waited <- r.AwaitPause(ctx, get) }()
	cancel()
	if ok := <-waited; ok {
		t.Fatal("AwaitPause: true with its context ended, under a pause of 60 s")
	}
	serve(t, r, s, "CLIENT UNPAUSE", "CLIENT PAUSE 50")
	if !r.AwaitPause(context.Background(), get) {
		t.Fatal("AwaitPause: false after a 50 ms pause")
	}
	if _, held := r.Paused(get[0], time.Now()); held {
		t.Fatal("held after AwaitPause returned")
	}
}
