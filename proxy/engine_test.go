package proxy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill-proxy/guard"
	"seckill-proxy/internal/resp"
)

// The core's buys, with a fake buy engine: no sockets, no Redis.

// fakeBuyer serves "BUY <sku> <uid>" for the core's buy tests: a call is written as
// "BUYCALL <sku> <uid>...", and the fake node answers each uid with a bulk string (or
// "-NOSCRIPT" for the whole call once, when noScript is set). It is the engine's buyer and
// its nodes: one master, "a".
type fakeBuyer struct {
	noScript   bool
	notHere    map[string]bool // SKUs whose group a BUYMANY answers NOTHERE
	down       int             // ReloadSlots calls
	sold       []string        // teed by Flush
	toTee      []string        // sold, for the next Flush
	finished   int
	unreachedN int // Fail calls for calls that did not reach Redis
}

func (b *fakeBuyer) Admit(req guard.BuyRequest, _ time.Time) (*guard.Attempt, []byte) {
	if req.SKU == "soldout" {
		return nil, []byte("-SOLDOUT soldout\r\n")
	}
	return guard.DetachedAttempt(req), nil
}
func (b *fakeBuyer) MasterOfTag(string) (string, error) { return "a", nil }

// AppendCall writes BUYCALL sku uid..., or for many groups BUYMANY sku uid... , sku uid...
// (BUYMANYEVAL after a NOSCRIPT).
func (b *fakeBuyer) AppendCall(dst []byte, groups [][]*guard.Attempt, eval bool) []byte {
	args := []string{"BUYCALL"}
	if len(groups) > 1 || eval {
		args[0] = "BUYMANY"
		if eval {
			args[0] = "BUYMANYEVAL"
		}
	}
	for i, as := range groups {
		if i > 0 {
			args = append(args, ",")
		}
		args = append(args, as[0].SKU())
		for _, a := range as {
			args = append(args, a.Request().UID)
		}
	}
	return append(dst, cmdsOf(strings.Join(args, " "))...)
}
func (b *fakeBuyer) Settle(as []*guard.Attempt, raw []byte, _ int, _ bool, _ func(*guard.Attempt, []byte)) []guard.Step {
	out := make([]guard.Step, len(as))
	if strings.HasPrefix(string(raw), "-NOSCRIPT") {
		for i, a := range as {
			a.NoScript()
			out[i].Retry = true
		}
		return out
	}
	for i, a := range as {
		id := "order-" + a.Request().UID
		out[i] = guard.Step{Reply: fmt.Appendf(nil, "$%d\r\n%s\r\n", len(id), id), Sold: true}
		b.toTee = append(b.toTee, a.Request().UID)
		b.finished++
	}
	return out
}
func (b *fakeBuyer) Fail(a *guard.Attempt, err error) []byte {
	if errors.Is(err, guard.ErrCallExpired) {
		return []byte("-UNAVAILABLE timed out\r\n")
	}
	b.unreachedN++
	b.finished++
	return upstreamUnavailable(err)
}
func (b *fakeBuyer) Late(as []*guard.Attempt, _ []byte, _ bool) { b.finished += len(as) }
func (b *fakeBuyer) Flush()                                     { b.sold, b.toTee = append(b.sold, b.toTee...), nil }
func (b *fakeBuyer) ReloadSlots()                               { b.down++ }
func (b *fakeBuyer) WaitCommand(string) ([]byte, int)           { return nil, 0 }
func (b *fakeBuyer) NoReplica([]*guard.Attempt) error           { return nil }
func (b *fakeBuyer) WaitReply([]byte, int) bool                 { return true }
func (b *fakeBuyer) CallTimeout() time.Duration                 { return 500 * time.Millisecond }

// buyNode answers the fake buyer's calls on the owner connection of node a.
func (h *coreHarness) buyNode(b *fakeBuyer) {
	up := h.k.ups[upKey{addr: "a", kind: upOwner}]
	if up == nil || !up.connected {
		return
	}
	rd := resp.NewReader(1 << 20)
	_, _ = rd.Write(up.out)
	up.out = up.out[:0]
	for {
		cmd, ok, _ := rd.Next(false)
		if !ok {
			break
		}
		if b.noScript {
			b.noScript = false
			up.in = append(up.in, "-NOSCRIPT No matching script.\r\n"...)
			continue
		}
		if name := string(cmd.Args[0]); strings.HasPrefix(name, "BUYMANY") {
			up.in = append(up.in, manyReply(b, cmd.Args[1:])...)
			continue
		}
		up.in = append(up.in, echo(cmd.Args)...) // the fake settle ignores its content
	}
	h.k.upRead(up)
}

// TestCoreBuys: the buys of two clients for one SKU in one turn go as one call on the owner
// connection, answered in each client's order among its other commands; a NOSCRIPT sends them
// again; a local answer needs no call; a pass-through command after a buy waits for it.
func TestCoreBuys(t *testing.T) {
	h := newCoreHarness(t, false)
	fb := &fakeBuyer{noScript: true}
	newEngine(h.k, fb, fb)
	c1, c2 := h.client(true), h.client(true)
	h.send(c1, cmdsOf("BUY s u1", "BUY soldout u1", "GET a1"))
	h.send(c2, cmdsOf("BUY s u2"))
	h.k.flushInputs()
	h.connect()
	owner := h.k.ups[upKey{addr: "a", kind: upOwner}]
	if owner == nil || strings.Count(string(owner.out), "BUYCALL") != 1 {
		t.Fatalf("the turn's buys: %q, want one call", owner.out)
	}
	if up := h.k.ups[upKey{addr: "a"}]; up != nil && len(up.out) > 0 {
		t.Fatalf("GET a1 went out before c1's buy was answered: %q", up.out)
	}
	for range 5 {
		h.buyNode(fb) // NOSCRIPT first, then the call again
		h.k.flushInputs()
		h.connect()
		for addr := range h.k.ups {
			if addr != (upKey{addr: "a", kind: upOwner}) {
				h.answer(addr, nil)
			}
		}
		h.flush()
	}
	if got, want := h.got[c1].String(), "$8\r\norder-u1\r\n-SOLDOUT soldout\r\n"+echoes("GET a1"); got != want {
		t.Fatalf("c1 got %q, want %q", got, want)
	}
	if got := h.got[c2].String(); got != "$8\r\norder-u2\r\n" {
		t.Fatalf("c2 got %q", got)
	}
	if strings.Join(fb.sold, ",") != "u1,u2" || fb.finished != 2 || h.k.inflight != 0 {
		t.Fatalf("teed %v, finished %d, in flight %d", fb.sold, fb.finished, h.k.inflight)
	}
}

// TestCoreBuyTimeout: a call Redis does not answer in buy.call_timeout is answered
// UNAVAILABLE; its late reply ends the attempts without a second answer.
func TestCoreBuyTimeout(t *testing.T) {
	h := newCoreHarness(t, false)
	fb := &fakeBuyer{}
	newEngine(h.k, fb, fb)
	c := h.client(true)
	h.send(c, cmdsOf("BUY s u1"))
	h.k.flushInputs()
	h.connect()
	h.k.now = h.k.now.Add(600 * time.Millisecond)
	h.k.expire()
	h.flush()
	if got := h.got[c].String(); got != "-UNAVAILABLE timed out\r\n" {
		t.Fatalf("after the deadline: %q", got)
	}
	h.buyNode(fb)
	h.flush()
	if got := h.got[c].String(); got != "-UNAVAILABLE timed out\r\n" || fb.finished != 1 || c.buysOut != 0 {
		t.Fatalf("after the late reply: %q, finished %d, buys out %d", got, fb.finished, c.buysOut)
	}
}

// TestCoreBuyConnectionLost: the buys of a call whose connection fails before its reply are
// answered UNAVAILABLE through the engine (which counts them: the script may have run), each
// once.
func TestCoreBuyConnectionLost(t *testing.T) {
	h := newCoreHarness(t, false)
	fb := &fakeBuyer{}
	newEngine(h.k, fb, fb)
	c := h.client(true)
	h.send(c, cmdsOf("BUY s u1", "BUY s u2"))
	h.k.flushInputs()
	h.connect()
	owner := h.k.ups[upKey{addr: "a", kind: upOwner}]
	h.k.upFailed(owner, errors.New("connection reset by peer"), unavailLost)
	h.flush()
	if got := h.got[c].String(); strings.Count(got, "-UNAVAILABLE") != 2 || !strings.Contains(got, "connection reset") {
		t.Fatalf("the buyer got %q, want two UNAVAILABLE naming the cause", got)
	}
	if fb.unreachedN != 2 || fb.finished != 2 || c.buysOut != 0 || h.k.inflight != 0 {
		t.Fatalf("engine answered %d, finished %d, buys out %d, in flight %d; want 2, 2, 0, 0", fb.unreachedN, fb.finished, c.buysOut, h.k.inflight)
	}
}

// TestCoreRetryIsPendingWork: a call sent back for another round (NOSCRIPT here; a MOVED, or
// a call settled when its connection fails while the turn's writes go out) leaves the core
// with work that the loop must not wait for an event to do.
func TestCoreRetryIsPendingWork(t *testing.T) {
	h := newCoreHarness(t, false)
	fb := &fakeBuyer{noScript: true}
	newEngine(h.k, fb, fb)
	c := h.client(true)
	h.send(c, cmdsOf("BUY s u1"))
	h.k.flushInputs()
	h.connect()
	if h.k.pendingWork() {
		t.Fatal("pending work once the buy is sent")
	}
	h.buyNode(fb) // NOSCRIPT: the buy goes again
	if !h.k.pendingWork() {
		t.Fatal("a buy sent back for another round is not pending work")
	}
	h.k.flushInputs()
	h.buyNode(fb)
	h.flush()
	if got := h.got[c].String(); got != "$8\r\norder-u1\r\n" || h.k.pendingWork() {
		t.Fatalf("after the second round: %q, pending %v", got, h.k.pendingWork())
	}
}

// TestCoreBuyEndsSlowBatch: a buy that follows a command the router serves (ECHO here) in one
// read is not handed to the router with it: the loop runs it on the owner connection once the
// router's reply is in, so that every buy in loop mode takes one engine.
func TestCoreBuyEndsSlowBatch(t *testing.T) {
	h := newCoreHarness(t, false)
	fb := &fakeBuyer{}
	newEngine(h.k, fb, fb)
	c := h.client(true)
	h.send(c, cmdsOf("ECHO x", "BUY s u1", "ECHO y"))
	h.k.flushInputs()
	if len(h.env.slow) != 1 || len(h.env.slow[0].cmds) != 1 || string(h.env.slow[0].cmds[0][0]) != "ECHO" {
		t.Fatalf("the router was given %v, want ECHO x alone", h.env.slow)
	}
	for range 5 {
		h.serveSlow()
		h.k.flushInputs()
		h.connect()
		h.buyNode(fb)
		h.flush()
	}
	if got, want := h.got[c].String(), echoes("ECHO x")+"$8\r\norder-u1\r\n"+echoes("ECHO y"); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if strings.Join(fb.sold, ",") != "u1" {
		t.Fatalf("the loop's buyer sold %v, want u1", fb.sold)
	}
}

// TestCoreRunBuysBounded: the router's buys (runBuys) are answered through their callback, by
// index; with maxCallsOut 1, the buys that come while a call is out wait, and go together in
// one call once it is answered, before later ones and in their order; an expired call counts
// no longer, so the buys held behind it go at once.
func TestCoreRunBuysBounded(t *testing.T) {
	h := newCoreHarness(t, false)
	h.k.lim.maxCallsOut = 1
	fb := &fakeBuyer{}
	newEngine(h.k, fb, fb)
	got := map[string]string{}
	run := func(name string, uids ...string) {
		reqs := make([]guard.BuyRequest, len(uids))
		for i, u := range uids {
			reqs[i] = guard.BuyRequest{SKU: "s", UID: u, Qty: 1}
		}
		h.k.eng.run(reqs, func(i int, reply []byte) { got[name+uids[i]] = string(reply) })
	}
	run("a:", "u1", "u2")
	h.k.flushInputs()
	h.connect()
	owner := h.k.ups[upKey{addr: "a", kind: upOwner}]
	if n := strings.Count(string(owner.out), "BUYCALL"); n != 1 || owner.callsOut != 1 {
		t.Fatalf("first turn: %d calls written, %d out; want 1 and 1", n, owner.callsOut)
	}
	first := string(owner.out)
	run("b:", "u3")
	h.k.flushInputs()
	run("c:", "u4", "u5")
	h.k.flushInputs()
	if string(owner.out) != first || len(h.k.eng.later) != 3 || h.k.pendingWork() {
		t.Fatalf("while a call is out: out %q, %d held, pending %v; want nothing more written, 3 held, no pending work",
			owner.out, len(h.k.eng.later), h.k.pendingWork())
	}
	h.buyNode(fb)
	if len(got) != 2 || got["a:u1"] != "$8\r\norder-u1\r\n" || got["a:u2"] != "$8\r\norder-u2\r\n" {
		t.Fatalf("after the first reply: %v", got)
	}
	h.k.flushInputs()
	if string(owner.out) != cmdsOf("BUYCALL s u3 u4 u5") || owner.callsOut != 1 {
		t.Fatalf("the held buys: %q (%d out), want one call for u3 u4 u5", owner.out, owner.callsOut)
	}
	run("d:", "u6")
	h.k.flushInputs()
	h.k.now = h.k.now.Add(600 * time.Millisecond) // past callTimeout: the call is answered, and not out
	h.k.expire()
	h.k.flushInputs()
	if got["b:u3"] != "-UNAVAILABLE timed out\r\n" || !strings.HasSuffix(string(owner.out), cmdsOf("BUYCALL s u6")) {
		t.Fatalf("after the deadline: u3 %q, out %q; want a timeout and u6's call written", got["b:u3"], owner.out)
	}
}

// waitingBuyer is fakeBuyer with WAIT on: each node's calls of a turn are followed by WAIT.
// waitingBuyer follows each node's calls with WAIT 1; short: it takes every WAIT's reply to
// count too few replicas (the fake does not read it).
type waitingBuyer struct {
	fakeBuyer
	short bool
}

func (b *waitingBuyer) WaitCommand(string) ([]byte, int) { return []byte(cmdsOf("WAIT 1 1000")), 1 }
func (b *waitingBuyer) WaitReply([]byte, int) bool       { return !b.short }
func (b *waitingBuyer) Settle(as []*guard.Attempt, raw []byte, round int, replicated bool, later func(*guard.Attempt, []byte)) []guard.Step {
	if !replicated {
		out := make([]guard.Step, len(as))
		for i := range out {
			out[i].Reply = []byte("-UNAVAILABLE not known\r\n")
			b.finished++
		}
		return out
	}
	return b.fakeBuyer.Settle(as, raw, round, replicated, later)
}

// TestOwnerLanes: while a turn's WAIT is out on an owner connection (Redis holds whatever is
// written behind it), the next turn's calls to that master go on another lane, and once the
// first lane's WAIT is answered its calls go there again; past the lanes, the one with the
// fewest commands out.
func TestOwnerLanes(t *testing.T) {
	const ownerLanes = 4
	h := newCoreHarness(t, false)
	h.k.lim.ownerLanes = ownerLanes
	wb := &waitingBuyer{}
	newEngine(h.k, wb, wb)
	lane := func(i uint8) *node { return h.k.ups[upKey{addr: "a", kind: upOwner, lane: i}] }
	for turn := range ownerLanes {
		c := h.client(true)
		h.send(c, cmdsOf(fmt.Sprintf("BUY s u%d", turn)))
		h.k.flushInputs()
		h.connect()
		up := lane(uint8(turn))
		if up == nil || strings.Count(string(up.out), "BUYCALL") != 1 || strings.Count(string(up.out), "WAIT") != 1 {
			t.Fatalf("turn %d: lane %d holds %q; want its call and WAIT", turn, turn, outOf(up))
		}
	}
	h.answer(upKey{addr: "a", kind: upOwner, lane: 2}, nil) // lane 2's call and WAIT answered
	c := h.client(true)
	h.send(c, cmdsOf("BUY s again"))
	h.k.flushInputs()
	if up := lane(2); strings.Count(string(up.out), "BUYCALL") != 1 {
		t.Fatalf("after lane 2's WAIT was answered, the next call went elsewhere: lane 2 holds %q", up.out)
	}
	for i := range uint8(ownerLanes) {
		if i != 2 && strings.Count(string(lane(i).out), "BUYCALL") != 1 {
			t.Fatalf("lane %d holds %q; want only its first call", i, lane(i).out)
		}
	}
}

func outOf(up *node) string {
	if up == nil {
		return "(no lane)"
	}
	return string(up.out)
}

// TestRefusedCallNotHeldForWait: a call Redis refused before running it (here NOSCRIPT) wrote
// nothing, so it is settled, and sent again, at once: not after the WAIT behind it, which a
// master cut off from its replica answers only at WAIT's timeout, round after round.
func TestRefusedCallNotHeldForWait(t *testing.T) {
	h := newCoreHarness(t, false)
	h.k.lim.ownerLanes = 2
	wb := &waitingBuyer{}
	newEngine(h.k, wb, wb)
	c := h.client(true)
	h.send(c, cmdsOf("BUY s u1"))
	h.k.flushInputs()
	h.connect()
	first := h.k.ups[upKey{addr: "a", kind: upOwner, lane: 0}]
	if first == nil || strings.Count(string(first.out), "BUYCALL") != 1 {
		t.Fatalf("the call: %q", outOf(first))
	}
	first.out = first.out[:0]
	first.in = append(first.in, "-NOSCRIPT No matching script. Please use EVAL.\r\n"...) // the WAIT not answered
	h.k.upRead(first)
	h.k.flushInputs()
	h.connect()
	second := h.k.ups[upKey{addr: "a", kind: upOwner, lane: 1}]
	if second == nil || strings.Count(string(second.out), "BUYCALL") != 1 {
		t.Fatalf("the call again, with the first lane's WAIT out: lane 1 holds %q, lane 0 %q", outOf(second), first.out)
	}
}

// TestCoreHoldsBuyOnlyOnAnsweringNode: a buy call past its deadline is waited for while its
// node answered something within the last half call timeout (a busy machine), and answered
// UNAVAILABLE at its deadline when the node has been silent longer (a master stopped or cut
// off just after the call went out).
func TestCoreHoldsBuyOnlyOnAnsweringNode(t *testing.T) {
	for _, tc := range []struct {
		silent time.Duration // how long the node has said nothing at the deadline
		held   bool
	}{{100 * time.Millisecond, true}, {300 * time.Millisecond, false}} {
		h := newCoreHarness(t, false)
		fb := &fakeBuyer{} // call timeout 500 ms
		newEngine(h.k, fb, fb)
		c := h.client(true)
		h.send(c, cmdsOf("BUY s u1"))
		h.k.flushInputs()
		h.connect()
		owner := h.k.ups[upKey{addr: "a", kind: upOwner}]
		h.k.now = h.k.now.Add(501 * time.Millisecond)
		owner.lastRead = h.k.now.Add(-tc.silent)
		h.k.expire()
		h.flush()
		if got := h.got[c].String(); (got == "") != tc.held {
			t.Fatalf("node silent for %v at the deadline: the buyer got %q; want held %v", tc.silent, got, tc.held)
		}
	}
}

// TestWaitPastDeadline: a call's reply came, its WAIT did not (the master stopped between
// them): at the WAIT's deadline its buyer is answered UNAVAILABLE, not held until the master
// comes back; the WAIT's late reply then finishes the buy without a second answer.
func TestWaitPastDeadline(t *testing.T) {
	h := newCoreHarness(t, false)
	wb := &waitingBuyer{}
	newEngine(h.k, wb, wb)
	c := h.client(true)
	h.send(c, cmdsOf("BUY s u1"))
	h.k.flushInputs()
	h.connect()
	owner := h.k.ups[upKey{addr: "a", kind: upOwner}]
	owner.out = owner.out[:0]
	owner.in = append(owner.in, "$8\r\norder-u1\r\n"...) // the call's reply; its WAIT's never comes
	h.k.upRead(owner)
	h.flush()
	if got := h.got[c].String(); got != "" {
		t.Fatalf("answered before its WAIT: %q", got)
	}
	h.k.now = h.k.now.Add(501 * time.Millisecond)
	owner.lastRead = h.k.now.Add(-501 * time.Millisecond)
	h.k.expire()
	h.flush()
	if got := h.got[c].String(); got != "-UNAVAILABLE timed out\r\n" {
		t.Fatalf("at the WAIT's deadline the buyer got %q, want UNAVAILABLE", got)
	}
	owner.in = append(owner.in, ":1\r\n"...)
	h.k.upRead(owner)
	h.flush()
	if got := h.got[c].String(); got != "-UNAVAILABLE timed out\r\n" || wb.finished != 1 || c.buysOut != 0 || h.k.inflight != 0 {
		t.Fatalf("after the WAIT's late reply: %q, finished %d, buys out %d, in flight %d", got, wb.finished, c.buysOut, h.k.inflight)
	}
}

// loneBuyer is the fake buyer of a master with no replica online (WaitCommand -1), whose
// guard refuses the buys (buy.no_replica refuse, or Kafka away).
type loneBuyer struct {
	fakeBuyer
	asked int
}

func (b *loneBuyer) WaitCommand(string) ([]byte, int) { return nil, -1 }
func (b *loneBuyer) NoReplica(as []*guard.Attempt) error {
	b.asked += len(as)
	return guard.ErrNoReplica
}

// TestCoreRefusesBuysWithNoReplica: the buys of a turn on a master with no replica online
// that the guard refuses go nowhere: nothing is written to the master, each buyer is answered
// with the refusal, and the client's next command is served.
func TestCoreRefusesBuysWithNoReplica(t *testing.T) {
	h := newCoreHarness(t, false)
	fb := &loneBuyer{}
	newEngine(h.k, fb, fb)
	c := h.client(true)
	h.send(c, cmdsOf("BUY s u1", "BUY s u2", "GET a1"))
	h.k.flushInputs()
	h.connect()
	if owner := h.k.ups[upKey{addr: "a", kind: upOwner}]; owner != nil && len(owner.out) > 0 {
		t.Fatalf("a refused turn wrote to the master: %q", owner.out)
	}
	for range 3 {
		h.k.flushInputs()
		h.connect()
		for addr := range h.k.ups {
			h.answer(addr, nil)
		}
		h.flush()
	}
	got := h.got[c].String()
	if strings.Count(got, "-UNAVAILABLE") != 2 || !strings.Contains(got, "no replica online") || !strings.HasSuffix(got, echoes("GET a1")) {
		t.Fatalf("the client got %q, want two refusals, then GET's reply", got)
	}
	if fb.asked != 2 || fb.unreachedN != 2 || h.k.inflight != 0 {
		t.Fatalf("asked %d, failed %d, in flight %d", fb.asked, fb.unreachedN, h.k.inflight)
	}
}
