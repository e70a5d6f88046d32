package proxy

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidwall/redcon"
	"go.uber.org/zap"

	"seckill-proxy/guard"
	"seckill-proxy/internal/resp"
	"seckill-proxy/router"
	"seckill-proxy/upstream"
)

// The core's tests run without sockets or Redis: a fake env routes keys to nodes by their
// first letter, fake nodes answer every command with its own arguments (so that each reply
// says which command it answers), and the router's slow path is the same echo, run when the
// test says.

type fakeEnv struct {
	k         *core
	route     map[byte]string // first letter of the key -> node; others go to "a"
	dials     []*node
	slow      []slowCall
	redirects []redirectJob
	posted    []func()
	begun     int
	// pauseUntil: CLIENT PAUSE holds every command until then (zero: no pause).
	pauseUntil time.Time
	// blocking: startBlocking takes blocking commands (as with a spare idle), into started.
	blocking bool
	started  []slowCall
}

type slowCall struct {
	c    *client
	cmds [][][]byte
}

// fakeBlocking are the commands the fake router classifies as blocking.
var fakeBlocking = map[string]bool{"blpop": true, "brpop": true, "xread": true, "wait": true}

// classify: BUY is a buy, SUBSCRIBE takes a goroutine, the blocking ones block, ECHO, PING and
// a command without a key go to the router, and any other goes straight to the node of its
// key's first letter.
func (e *fakeEnv) classify(_ *router.Session, args [][]byte) router.Class {
	name := strings.ToLower(string(args[0]))
	switch {
	case name == "buy":
		return router.Class{Kind: router.KindBuy}
	case name == "subscribe":
		return router.Class{Kind: router.KindOwnGoroutine}
	case fakeBlocking[name]:
		return router.Class{Kind: router.KindBlocking, Blocks: true}
	case name == "echo" || name == "ping" || len(args) < 2:
		return router.Class{}
	}
	if addr, ok := e.route[append(args[1], 'a')[0]]; ok {
		return router.Class{Kind: router.KindDirect, Addr: addr, Slot: upstream.Slot(args[1])}
	}
	return router.Class{Kind: router.KindDirect, Addr: "a", Slot: upstream.Slot(args[1])}
}
func (e *fakeEnv) peek(s *router.Session, args [][]byte) router.Class {
	cl := e.classify(s, args)
	if cl.Kind == router.KindDirect || cl.Kind == router.KindBlocking {
		return router.Class{Blocks: cl.Blocks}
	}
	return cl
}
func (e *fakeEnv) immediate(out []byte, _ [][]byte) []byte { return out }
func (e *fakeEnv) counted(int)                             {}

// parseBuy reads "BUY <sku> <uid>".
func (e *fakeEnv) parseBuy(_ *router.Session, _ router.Class, args [][]byte) (guard.BuyRequest, []byte) {
	if len(args) != 3 {
		return guard.BuyRequest{}, []byte("-ERR wrong number of arguments for 'buy' command\r\n")
	}
	return guard.BuyRequest{SKU: string(args[1]), UID: string(args[2]), Qty: 1}, nil
}
func (e *fakeEnv) begin() bool   { e.begun++; return true }
func (e *fakeEnv) end()          { e.begun-- }
func (e *fakeEnv) dial(up *node) { e.dials = append(e.dials, up) }
func (e *fakeEnv) serveSlow(c *client, cmds [][][]byte, _ []router.Class) {
	e.slow = append(e.slow, slowCall{c, cmds})
}
func (e *fakeEnv) startBlocking(c *client, _ router.Class, args [][]byte) bool {
	if e.blocking {
		e.started = append(e.started, slowCall{c, [][][]byte{router.CopyArgs(args)}})
	}
	return e.blocking
}
func (e *fakeEnv) followRedirects(jobs []redirectJob)  { e.redirects = append(e.redirects, jobs...) }
func (e *fakeEnv) post(f func())                       { e.posted = append(e.posted, f) }
func (e *fakeEnv) monitored(*router.Session, [][]byte) {}
func (e *fakeEnv) paused(_ [][]byte, now time.Time) (time.Time, bool) {
	return e.pauseUntil, now.Before(e.pauseUntil)
}

// echo is the fake reply to a command: its arguments, joined, as a bulk string.
func echo(args [][]byte) []byte {
	v := bytes.Join(args, []byte(" "))
	return fmt.Appendf(nil, "$%d\r\n%s\r\n", len(v), v)
}

type coreHarness struct {
	t   *testing.T
	k   *core
	env *fakeEnv
	got map[*client]*bytes.Buffer
}

func newCoreHarness(t *testing.T, cluster bool) *coreHarness {
	env := &fakeEnv{route: map[byte]string{'b': "b"}}
	k := newCore(env, coreLimits{maxPipeline: 1024, maxReq: 1 << 20, maxArgBytes: 1 << 20, maxOut: 1 << 20,
		timeout: time.Second, redialGap: 100 * time.Millisecond}, cluster)
	k.now = time.Unix(1_700_000_000, 0)
	env.k = k
	return &coreHarness{t: t, k: k, env: env, got: map[*client]*bytes.Buffer{}}
}

func (h *coreHarness) client(authed bool) *client {
	r := router.New(nil, zap.NewNop(), router.Options{Password: map[bool]string{true: "", false: "pw"}[authed]})
	c := h.k.newClient(context.Background(), len(h.got)+1, r.NewSession("127.0.0.1:1"), "test")
	h.got[c] = &bytes.Buffer{}
	return c
}

// send gives the core what c sent.
func (h *coreHarness) send(c *client, data string) { h.k.clientRead(c, []byte(data)) }

// connect completes the dials asked for.
func (h *coreHarness) connect() {
	for _, up := range h.env.dials {
		h.k.upConnected(up)
	}
	h.env.dials = nil
}

// answer has node addr answer every command written to it so far, reply choosing the reply
// (nil: echo).
func (h *coreHarness) answer(key upKey, reply func(args [][]byte) []byte) {
	up := h.k.ups[key]
	if up == nil || !up.connected {
		return
	}
	rd := resp.NewReader(1 << 30)
	_, _ = rd.Write(up.out)
	up.out = up.out[:0]
	for {
		cmd, ok, err := rd.Next(false)
		if err != nil || !ok {
			break
		}
		r := echo(cmd.Args)
		if reply != nil {
			r = reply(cmd.Args)
		}
		up.in = append(up.in, r...)
	}
	h.k.upRead(up)
}

// serveSlow runs the router's batches asked for: each command's reply is its echo.
func (h *coreHarness) serveSlow() {
	calls := h.env.slow
	h.env.slow = nil
	for _, sc := range calls {
		var out []byte
		for _, args := range sc.cmds {
			out = append(out, echo(args)...)
		}
		h.k.slowDone(sc.c, out, false)
	}
}

// flush ends a turn: what waits is served, and every client's replies are written.
func (h *coreHarness) flush() {
	h.k.flushInputs()
	h.k.takeDirty(func(c *client) {
		h.got[c].Write(c.out)
		h.k.wrote(c, len(c.out), false)
	})
}

// turn connects, lets every node answer, runs the slow batches, and flushes, until nothing
// moves.
func (h *coreHarness) turn() {
	for range 100 {
		h.connect()
		for addr := range h.k.ups {
			h.answer(addr, nil)
		}
		h.serveSlow()
		h.flush()
		if len(h.env.slow) == 0 && len(h.k.dirty) == 0 && h.k.inflight == 0 {
			return
		}
	}
	h.t.Fatal("the core does not settle")
}

func cmdsOf(cmds ...string) string {
	var b strings.Builder
	for _, c := range cmds {
		f := strings.Fields(c)
		fmt.Fprintf(&b, "*%d\r\n", len(f))
		for _, a := range f {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	return b.String()
}

func echoes(cmds ...string) string {
	var b strings.Builder
	for _, c := range cmds {
		var args [][]byte
		for _, f := range strings.Fields(c) {
			args = append(args, []byte(f))
		}
		b.Write(echo(args))
	}
	return b.String()
}

// TestCoreOrder: a pipeline over two nodes and the router's slow path is answered in the
// client's order, whichever answers first; a slow command waits for the replies before it,
// and the commands after it wait for it.
func TestCoreOrder(t *testing.T) {
	h := newCoreHarness(t, true)
	c := h.client(true)
	cmds := []string{"GET a1", "GET b1", "ECHO x", "SET a2 v", "GET b2", "PING", "GET a3"}
	h.send(c, cmdsOf(cmds...))
	h.connect()
	if len(h.env.slow) != 0 {
		t.Fatal("ECHO went to the router before the replies before it")
	}
	h.answer(upKey{addr: "b"}, nil) // b first: its reply waits for a's
	h.flush()
	if got := h.got[c].String(); got != "" {
		t.Fatalf("replies before GET a1's: %q", got)
	}
	h.answer(upKey{addr: "a"}, nil)
	h.flush()
	if got := h.got[c].String(); got != echoes(cmds[:2]...) {
		t.Fatalf("after both nodes: %q", got)
	}
	h.turn()
	if got := h.got[c].String(); got != echoes(cmds...) {
		t.Fatalf("replies %q, want %q", got, echoes(cmds...))
	}
	if h.env.begun != 0 || h.k.inflight != 0 {
		t.Fatalf("begun %d, in flight %d after every reply", h.env.begun, h.k.inflight)
	}
}

// TestCoreBlockingStartsAtOnce: a blocking command is sent to Redis as the core reads it,
// before another client's later command goes out, and its client's later commands wait for
// its reply; without a spare connection it goes to the router as before.
func TestCoreBlockingStartsAtOnce(t *testing.T) {
	h := newCoreHarness(t, false)
	h.env.blocking = true
	a, b := h.client(true), h.client(true)
	h.send(a, cmdsOf("XREAD BLOCK 0 STREAMS s $", "GET a1"))
	if len(h.env.started) != 1 || string(h.env.started[0].cmds[0][0]) != "XREAD" {
		t.Fatalf("started %v, want the XREAD as soon as it was read", h.env.started)
	}
	h.send(b, cmdsOf("DEL s", "XADD s 1-1 f v"))
	h.connect()
	if up := h.k.ups[upKey{addr: "a"}]; up == nil || !strings.Contains(string(up.out), "XADD") || strings.Contains(string(up.out), "GET") {
		t.Fatalf("to node a: %q, want b's DEL and XADD, and not a's GET", h.k.ups[upKey{addr: "a"}].out)
	}
	h.turn()
	if got := h.got[a].String(); got != "" {
		t.Fatalf("a got %q while its XREAD waits", got)
	}
	h.k.slowDone(a, []byte("+entry\r\n"), false)
	h.turn()
	if got, want := h.got[a].String(), "+entry\r\n"+echoes("GET a1"); got != want {
		t.Fatalf("a got %q, want %q", got, want)
	}
	h.env.blocking = false
	h.send(a, cmdsOf("BLPOP l 0"))
	if len(h.env.slow) != 1 || len(h.env.started) != 1 {
		t.Fatalf("without a spare: %d slow batches, %d started; want the router's", len(h.env.slow), len(h.env.started))
	}
}

// TestCoreSlotBarrier: while a command of a slot waits on one node (its MOVED reply, then
// the redirect), a later command of the same slot that the slot map now sends to another
// node waits for it; commands of other slots go on.
func TestCoreSlotBarrier(t *testing.T) {
	h := newCoreHarness(t, true)
	c := h.client(true)
	h.send(c, cmdsOf("SET a1 v"))
	h.connect()
	h.answer(upKey{addr: "a"}, func(args [][]byte) []byte { return []byte("-MOVED 123 127.0.0.1:9\r\n") })
	if len(h.env.redirects) != 1 {
		t.Fatalf("%d redirects asked for, want 1", len(h.env.redirects))
	}
	h.env.route['a'] = "b" // the slot map has moved a1's slot to b
	h.send(c, cmdsOf("GET a1", "GET bee"))
	h.connect()
	if up := h.k.ups[upKey{addr: "b"}]; up != nil && strings.Contains(string(up.out), "a1") {
		t.Fatal("GET a1 went to b before the SET's redirect was answered")
	}
	j := h.env.redirects[0]
	h.env.redirects = nil
	h.k.redirected(j, []byte("+OK\r\n"))
	h.k.redirectsDone()
	h.turn()
	if got, want := h.got[c].String(), "+OK\r\n"+echoes("GET a1", "GET bee"); got != want {
		t.Fatalf("replies %q, want %q", got, want)
	}
}

// TestCoreTimeout: a command past its deadline is answered UNAVAILABLE alone; the command
// after it is answered when the node gets to it, and the late reply is dropped. A node silent
// for two timeouts is dropped, and what waits on it fails.
func TestCoreTimeout(t *testing.T) {
	h := newCoreHarness(t, false)
	c := h.client(true)
	h.send(c, cmdsOf("EVAL slow"))
	h.connect()
	h.k.now = h.k.now.Add(600 * time.Millisecond)
	h.send(c, cmdsOf("GET a1"))
	h.k.now = h.k.now.Add(500 * time.Millisecond) // the EVAL's deadline has passed, not the GET's
	if dropped := h.k.expire(); len(dropped) != 0 {
		t.Fatal("a node that answers within the timeout was dropped")
	}
	h.flush()
	if got := h.got[c].String(); !strings.HasPrefix(got, "-UNAVAILABLE redis a: ") || !strings.Contains(got, "i/o timeout") {
		t.Fatalf("after the EVAL's deadline: %q", got)
	}
	h.got[c].Reset()
	h.answer(upKey{addr: "a"}, nil) // the EVAL's reply comes late, then the GET's
	h.flush()
	if got := h.got[c].String(); got != echoes("GET a1") {
		t.Fatalf("after the node answered: %q", got)
	}
	h.got[c].Reset()
	h.send(c, cmdsOf("GET a2"))
	h.k.now = h.k.now.Add(1500 * time.Millisecond)
	if dropped := h.k.expire(); len(dropped) != 0 {
		t.Fatal("a node silent for less than two timeouts was dropped")
	}
	h.flush()
	h.got[c].Reset()
	h.k.now = h.k.now.Add(500 * time.Millisecond)
	if dropped := h.k.expire(); len(dropped) != 1 || h.k.ups[upKey{addr: "a"}].connected {
		t.Fatalf("a node silent for two timeouts: dropped %d", len(dropped))
	}
	h.flush()
	if got := h.got[c].String(); got != "" {
		t.Fatalf("GET a2, answered at its deadline already, answered again: %q", got)
	}
}

// TestCoreInputs: a protocol error is answered after the replies before it and closes the
// client; a client that has not logged in is held to Redis's bounds; a drain refuses new
// commands once the ones in flight are answered.
func TestCoreInputs(t *testing.T) {
	h := newCoreHarness(t, false)
	c := h.client(true)
	h.send(c, cmdsOf("GET a1")+"*1\r\n$x\r\n")
	h.turn()
	if got, want := h.got[c].String(), echoes("GET a1")+"-ERR Protocol error: invalid bulk length\r\n"; got != want || h.k.settled(c) != "close" {
		t.Fatalf("replies %q, settled %q", got, h.k.settled(c))
	}
	anon := h.client(false)
	h.send(anon, "*11\r\n")
	h.turn()
	if got := h.got[anon].String(); got != "-ERR Protocol error: unauthenticated multibulk length\r\n" {
		t.Fatalf("before AUTH: %q", got)
	}
	d := h.client(true)
	h.send(d, cmdsOf("GET a1"))
	h.k.drain(func(mark func(*client)) { mark(d) })
	h.send(d, cmdsOf("GET a2"))
	h.turn()
	if got, want := h.got[d].String(), echoes("GET a1")+"-UNAVAILABLE proxy is shutting down\r\n"; got != want {
		t.Fatalf("draining: %q", got)
	}
}

// TestCoreBackpressure: a client whose unwritten replies pass the bound is not served until
// they are written.
func TestCoreBackpressure(t *testing.T) {
	h := newCoreHarness(t, false)
	h.k.lim.maxOut = 100
	c := h.client(true)
	h.send(c, cmdsOf("GET "+strings.Repeat("k", 200), "ECHO after"))
	h.connect()
	h.answer(upKey{addr: "a"}, nil)
	h.k.flushInputs()
	if h.k.canServe(c) || len(h.env.slow) != 0 {
		t.Fatal("served with more than maxOut unwritten")
	}
	h.turn()
	if !strings.HasSuffix(h.got[c].String(), echoes("ECHO after")) {
		t.Fatalf("the ECHO was not served once the output was written: %q", h.got[c].String())
	}
}

// FuzzCore: whatever a client sends, in whatever pieces, each node answering each turn, the
// client gets one reply per command, in order, until the first malformed request, which is
// answered last.
func FuzzCore(f *testing.F) {
	f.Add([]byte(cmdsOf("GET a1", "ECHO x", "GET b1", "SET a2 v")), []byte{3, 9, 1}, true)
	f.Add([]byte("PING\r\nGET b \"x y\"\r\n*1\r\n$-1\r\n"), []byte{1}, false)
	f.Add([]byte(cmdsOf("SUBSCRIBE c", "GET a")), []byte{}, true)
	f.Fuzz(func(t *testing.T, in []byte, cuts []byte, cluster bool) {
		h := newCoreHarness(t, cluster)
		c := h.client(true)
		want, tail := expectedReplies(in)
		rest := in
		for _, cut := range cuts {
			n := min(int(cut), len(rest))
			h.send(c, string(rest[:n]))
			rest = rest[n:]
			h.turn()
		}
		h.send(c, string(rest))
		h.turn()
		got := h.got[c].String()
		if c.handoff {
			want = want[:min(len(want), len(got))] // handed over: the rest is another goroutine's
		}
		if got != want+tail && !(c.handoff && got == want) {
			t.Fatalf("replies %q\nwant %q", got, want+tail)
		}
	})
}

// expectedReplies are the echoes of the commands in the whole input, up to a SUBSCRIBE (the
// hand-over) or the first malformed request, whose error comes after them (tail).
func expectedReplies(in []byte) (want, tail string) {
	rd := resp.NewReader(1 << 20)
	_, _ = rd.Write(in)
	var b strings.Builder
	for {
		cmd, ok, err := rd.Next(false)
		if err != nil {
			return b.String(), string(redcon.AppendError(nil, "ERR "+err.Error()))
		}
		if !ok || strings.EqualFold(string(cmd.Args[0]), "subscribe") {
			return b.String(), ""
		}
		b.Write(echo(cmd.Args))
	}
}

// TestCoreMetrics: the core counts pass-through commands by name and their errors, a command
// answered at its deadline as an error under the timeout reason, a MOVED followed, and the
// connections it opened.
func TestCoreMetrics(t *testing.T) {
	h := newCoreHarness(t, true)
	h.k.metrics = NewMetrics(func() []guard.Field { return nil }, nil)
	p := h.k.metrics.pass
	c := h.client(true)
	h.send(c, cmdsOf("EVAL slow"))
	h.connect()
	h.k.now = h.k.now.Add(600 * time.Millisecond)
	h.send(c, cmdsOf("get a1"))
	h.k.now = h.k.now.Add(500 * time.Millisecond)
	h.k.expire()
	h.answer(upKey{addr: "a"}, nil)
	h.flush()
	h.send(c, cmdsOf("SET a2 v"))
	h.answer(upKey{addr: "a"}, func(args [][]byte) []byte { return []byte("-MOVED 123 127.0.0.1:9\r\n") })
	for _, j := range h.env.redirects {
		h.k.redirected(j, []byte("+OK\r\n"))
	}
	h.flush()
	for name, want := range map[string][2]int64{"eval": {1, 1}, "get": {1, 0}, "set": {1, 0}} {
		s := p.stat([]byte(name))
		if got := [2]int64{s.calls.Load(), s.errors.Load()}; got != want {
			t.Errorf("%s: calls and errors %v, want %v", name, got, want)
		}
	}
	if got := testutil.ToFloat64(p.unavailable.WithLabelValues(unavailTimeout)); got != 1 {
		t.Errorf("unavailable{reason=timeout} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(p.moved); got != 1 {
		t.Errorf("redirects{kind=moved} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(p.connects); got != 1 {
		t.Errorf("connects = %v, want 1", got)
	}
}

// TestCommandKey: command names are counted in lower case; anything that is not a command's
// name, or longer than one, is "other".
func TestCommandKey(t *testing.T) {
	for in, want := range map[string]string{"GET": "get", "client|list": "client|list", "x y": "other",
		strings.Repeat("a", 33): "other", "SeckILL.Buy": "seckill.buy", "": ""} {
		if got := string(commandKey(nil, []byte(in))); got != want {
			t.Errorf("commandKey(%q) = %q, want %q", in, got, want)
		}
	}
	p := newPassMetrics(prometheus.NewRegistry())
	for i := range maxPassNames + 10 {
		p.stat([]byte(fmt.Sprintf("cmd%d", i)))
	}
	if n := len(*p.names.Load()); n != maxPassNames+1 {
		t.Errorf("%d names after %d distinct ones, want %d (and other)", n, maxPassNames+10, maxPassNames)
	}
}

// BenchmarkPassMetrics is what /metrics costs one pass-through command on an event loop: its
// counters' lookup, the reply's count and its latency.
func BenchmarkPassMetrics(b *testing.B) {
	k := &core{metrics: NewMetrics(func() []guard.Field { return nil }, nil)}
	name, reply := []byte("GET"), []byte("$1\r\nx\r\n")
	b.ReportAllocs()
	for b.Loop() {
		k.passStat(name).done(k.passLat, reply, 300*time.Microsecond)
	}
}

// TestTakeDirtyLetsGo: the dirty list's array outlives the turn, so it must not keep the
// clients of a turn (and their buffers, 64 MiB for a big PING) reachable after it.
func TestTakeDirtyLetsGo(t *testing.T) {
	k := newCore(&fakeEnv{}, coreLimits{maxPipeline: 16, maxReq: 1 << 20, maxArgBytes: 1 << 20, maxOut: 1 << 20,
		timeout: time.Second, redialGap: time.Millisecond}, false)
	for i := range 3 {
		k.markDirty(&client{id: i})
	}
	k.takeDirty(func(*client) {})
	if len(k.dirty) != 0 {
		t.Fatalf("%d clients still dirty", len(k.dirty))
	}
	for i, c := range k.dirty[:cap(k.dirty)] {
		if c != nil {
			t.Fatalf("slot %d of the dirty list still holds a client after the turn", i)
		}
	}
}
