package proxy_test

import (
	"strings"
	"testing"
	"time"
)

// readLine reads one line (a monitor's feed), within 5 s.
func (rc *rawClient) readLine(t *testing.T) string {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := rc.r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// TestMonitor: MONITOR feeds the commands this proxy's clients run, in order and as Redis
// writes them: pass-through on the event loop's direct path and through the router, the
// proxy's own, a buy, AUTH with its password redacted; RESET leaves MONITOR mode.
func TestMonitor(t *testing.T) {
	s := start(t, nil)
	m, c := dialRaw(t, s.addr), dialRaw(t, s.addr)
	if got := m.do(t, "MONITOR"); got != "+OK\r\n" {
		t.Fatalf("MONITOR: %q", got)
	}
	k := "{" + newSKU("mon") + "}"
	sku := newSKU("monsale")
	cmds := [][]string{{"SET", k, "v\n"}, {"GET", k}, {"MGET", k, k + "x"}, {"SECKILL.BUY", sku, "u1"}, {"AUTH", "secret"}, {"ECHO", "hi"}}
	for _, cmd := range cmds {
		c.do(t, cmd...)
	}
	want := []string{`"SET" "` + k + `" "v\n"`, `"GET" "` + k + `"`, `"MGET" "` + k + `" "` + k + `x"`, `"SECKILL.BUY" "` + sku + `" "u1"`, `"AUTH" "(redacted)"`, `"ECHO" "hi"`}
	local := c.c.LocalAddr().String()
	for _, w := range want {
		line := m.readLine(t)
		if !strings.HasPrefix(line, "+") || !strings.Contains(line, " [0 "+local+"] ") || !strings.HasSuffix(line, w+"\r\n") {
			t.Fatalf("fed %q, want a line of %s ending %s", line, local, w)
		}
	}
	m.send(t, "RESET")
	for {
		if line := m.readLine(t); line == "+RESET\r\n" {
			break
		}
	}
	c.do(t, "GET", k)
	if got := m.do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after RESET: %q, want +PONG with no line of the GET before it", got)
	}
}
