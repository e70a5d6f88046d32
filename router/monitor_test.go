package router

import (
	"strings"
	"testing"
	"time"
)

// TestMonitorLine: a monitor line is Redis's: the time with microseconds, db 0 and the
// client's address, each argument quoted as sdscatrepr quotes it, passwords redacted.
func TestMonitorLine(t *testing.T) {
	at := time.Unix(1339518083, 7412000)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "a b", "x\"y\\\n\r\t\a\b\x01\xff"}, `+1339518083.007412 [0 127.0.0.1:5000] "SET" "a b" "x\"y\\\n\r\t\a\b\x01\xff"`},
		{[]string{"AUTH", "secret"}, `+1339518083.007412 [0 127.0.0.1:5000] "AUTH" "(redacted)"`},
		{[]string{"auth", "user", "secret"}, `+1339518083.007412 [0 127.0.0.1:5000] "auth" "(redacted)" "(redacted)"`},
		{[]string{"HELLO", "3", "AUTH", "user", "secret", "SETNAME", "n"}, `+1339518083.007412 [0 127.0.0.1:5000] "HELLO" "3" "AUTH" "(redacted)" "(redacted)" "(redacted)" "(redacted)"`},
		{[]string{"HELLO", "3"}, `+1339518083.007412 [0 127.0.0.1:5000] "HELLO" "3"`},
	} {
		args := make([][]byte, len(c.args))
		for i, a := range c.args {
			args[i] = []byte(a)
		}
		got := string(monitorLine(at, "127.0.0.1:5000", args))
		if got != c.want+"\r\n" {
			t.Errorf("%q:\n got %s\nwant %s", c.args, strings.TrimSpace(got), c.want)
		}
	}
}

// TestMonitorFeed: a feed gets the commands fed while it runs, in order; one that falls
// monitorBacklog lines behind says so and is fed no more; stopped, none.
func TestMonitorFeed(t *testing.T) {
	r := &Router{}
	s := &Session{Remote: "127.0.0.1:1"}
	r.Monitored(s, [][]byte{[]byte("GET"), []byte("before")}) // no monitor: nothing
	lines, behind, stop := r.Monitor()
	r.Monitored(s, [][]byte{[]byte("GET"), []byte("a")})
	if got := string(<-lines); !strings.HasSuffix(got, `"GET" "a"`+"\r\n") {
		t.Fatalf("fed %q", got)
	}
	for range monitorBacklog + 1 {
		r.Monitored(s, [][]byte{[]byte("PING")})
	}
	if !behind() || len(lines) != monitorBacklog {
		t.Fatalf("behind %v with %d lines waiting", behind(), len(lines))
	}
	stop()
	stop()
	if r.mon.n.Load() != 0 {
		t.Fatalf("%d monitors after stop", r.mon.n.Load())
	}
}
