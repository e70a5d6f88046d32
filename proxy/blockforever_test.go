package proxy_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"seckill-proxy/conf"
	"seckill-proxy/internal/resp"
)

// send writes one command, and does not wait for its reply.
func (rc *rawClient) send(t *testing.T, args ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_ = rc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
}

// silentFor: no reply comes within d (a reply, or the connection's end, fails the test).
func (rc *rawClient) silentFor(t *testing.T, what string, d time.Duration) {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(d))
	reply, err := resp.ReadReply(rc.r)
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%s: answered %q (%v) within %v; Redis waits until data comes", what, reply, err, d)
	}
}

// reply reads one reply, within 10 s.
func (rc *rawClient) reply(t *testing.T) string {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply, err := resp.ReadReply(rc.r)
	if err != nil {
		t.Fatal(err)
	}
	return string(reply)
}

// TestBlockingWaitsForEver: blocking commands with a timeout of 0 wait as long as Redis
// would, past the command timeout and past any other number among their arguments (COUNT 2,
// numkeys 1), and are answered when data comes; a finite timeout still ends with Redis's nil.
func TestBlockingWaitsForEver(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Redis.CommandTimeout = time.Second })
	k := "{" + newSKU("block") + "}"
	blmpop, xread, blpop := dialRaw(t, s.addr), dialRaw(t, s.addr), dialRaw(t, s.addr)
	blmpop.send(t, "BLMPOP", "0", "1", k+"list", "LEFT")
	xread.send(t, "XREAD", "COUNT", "2", "BLOCK", "0", "STREAMS", k+"stream", "$")
	blpop.send(t, "BLPOP", k+"other", "0")
	// Before, the proxy cut these off after the largest number among the arguments, the
	// command timeout and a second: 3 s for BLMPOP, 4 s for XREAD.
	quiet := 4500 * time.Millisecond
	start := time.Now()
	blmpop.silentFor(t, "BLMPOP 0 1", quiet)
	xread.silentFor(t, "XREAD COUNT 2 BLOCK 0", quiet-time.Since(start))
	blpop.silentFor(t, "BLPOP 0", quiet-time.Since(start))
	w := dialRaw(t, s.addr)
	if got := w.do(t, "RPUSH", k+"list", "a"); got != ":1\r\n" {
		t.Fatalf("RPUSH: %q", got)
	}
	if got, want := blmpop.reply(t), "*2\r\n$"+fmt.Sprint(len(k+"list"))+"\r\n"+k+"list\r\n*1\r\n$1\r\na\r\n"; got != want {
		t.Errorf("BLMPOP after RPUSH: %q, want %q", got, want)
	}
	if got := w.do(t, "XADD", k+"stream", "*", "f", "v"); !strings.HasPrefix(got, "$") {
		t.Fatalf("XADD: %q", got)
	}
	if got := xread.reply(t); !strings.Contains(got, k+"stream") || !strings.Contains(got, "\r\nf\r\n$1\r\nv\r\n") {
		t.Errorf("XREAD after XADD: %q", got)
	}
	if got := w.do(t, "LPUSH", k+"other", "x"); got != ":1\r\n" {
		t.Fatalf("LPUSH: %q", got)
	}
	if got := blpop.reply(t); !strings.HasSuffix(got, "$1\r\nx\r\n") {
		t.Errorf("BLPOP after LPUSH: %q", got)
	}
	begun := time.Now()
	if got := w.do(t, "BLPOP", k+"empty", "0.3"); got != "*-1\r\n" {
		t.Errorf("BLPOP with 0.3 s on an empty list: %q, want a nil array", got)
	}
	if took := time.Since(begun); took < 250*time.Millisecond {
		t.Errorf("BLPOP 0.3 answered after %v", took)
	}
}
