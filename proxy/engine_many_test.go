package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// manyReply is the fake buymany's reply to groups (sku uid... , sku uid...): a value per
// group, NOTHERE for a SKU in b.notHere.
func manyReply(b *fakeBuyer, args [][]byte) []byte {
	groups := bytes.Split(bytes.Join(args, []byte(" ")), []byte(" , "))
	out := fmt.Appendf(nil, "*%d\r\n", len(groups))
	for _, g := range groups {
		if sku, _, _ := bytes.Cut(g, []byte(" ")); b.notHere[string(sku)] {
			out = append(out, "-NOTHERE ERR Script attempted to access a non local key in a cluster node\r\n"...)
			continue
		}
		out = append(out, echo([][]byte{g})...)
	}
	return out
}

// TestCoreBuysOfManySKUs: one turn's buys of three SKUs on one master go as one call of many
// groups; its NOSCRIPT settles each group as a call's own NOSCRIPT would (sent again as EVAL,
// alone), and the next call of many groups goes as EVAL; a SKU whose keys were not on the
// master (NOTHERE) goes again in a call of its own; each buyer is answered once, in order.
func TestCoreBuysOfManySKUs(t *testing.T) {
	h := newCoreHarness(t, false)
	fb := &fakeBuyer{noScript: true, notHere: map[string]bool{"b": true}}
	newEngine(h.k, fb, fb)
	c := h.client(true)
	h.send(c, cmdsOf("BUY a u1", "BUY b u2", "BUY c u3"))
	h.k.flushInputs()
	h.connect()
	owner := h.k.ups[upKey{addr: "a", kind: upOwner}]
	turn := func() {
		h.buyNode(fb)
		h.k.flushInputs()
		h.flush()
	}
	if got := string(owner.out); got != cmdsOf("BUYMANY a u1 , b u2 , c u3") {
		t.Fatalf("the turn's buys: %q, want one call of three groups", got)
	}
	turn() // NOSCRIPT
	if got := string(owner.out); got != cmdsOf("BUYCALL a u1", "BUYCALL b u2", "BUYCALL c u3") {
		t.Fatalf("after NOSCRIPT: %q, want each group's call again, as EVAL", got)
	}
	turn()
	h.send(c, cmdsOf("BUY a u4", "BUY b u5", "BUY c u6"))
	h.k.flushInputs()
	if got := string(owner.out); got != cmdsOf("BUYMANYEVAL a u4 , b u5 , c u6") {
		t.Fatalf("the next turn's buys: %q, want one call of three groups, as EVAL", got)
	}
	turn() // b answers NOTHERE
	if got := string(owner.out); got != cmdsOf("BUYCALL b u5") {
		t.Fatalf("after NOTHERE: %q, want b's buy in a call of its own", got)
	}
	turn()
	want := ""
	for i := 1; i <= 6; i++ {
		want += fmt.Sprintf("$8\r\norder-u%d\r\n", i)
	}
	if got := h.got[c].String(); got != want {
		t.Fatalf("c got %q, want %q", got, want)
	}
	if strings.Join(fb.sold, ",") != "u1,u2,u3,u4,u6,u5" || fb.finished != 6 || h.k.inflight != 0 || owner.callsOut != 0 {
		t.Fatalf("teed %v, finished %d, in flight %d, calls out %d", fb.sold, fb.finished, h.k.inflight, owner.callsOut)
	}
}

// TestCoreManyCallTimeout: a call of many groups past its deadline answers every buyer of
// every group UNAVAILABLE once; its late reply, NOTHERE parts included, ends the attempts
// without a second answer or another call.
func TestCoreManyCallTimeout(t *testing.T) {
	h := newCoreHarness(t, false)
	fb := &fakeBuyer{notHere: map[string]bool{"b": true}}
	newEngine(h.k, fb, fb)
	c := h.client(true)
	h.send(c, cmdsOf("BUY a u1", "BUY b u2"))
	h.k.flushInputs()
	h.connect()
	h.k.now = h.k.now.Add(600 * time.Millisecond)
	h.k.expire()
	h.flush()
	want := strings.Repeat("-UNAVAILABLE timed out\r\n", 2)
	if got := h.got[c].String(); got != want {
		t.Fatalf("after the deadline: %q", got)
	}
	owner := h.k.ups[upKey{addr: "a", kind: upOwner}]
	h.buyNode(fb)
	h.k.flushInputs()
	h.flush()
	if got := h.got[c].String(); got != want || fb.finished != 2 || c.buysOut != 0 || len(owner.out) != 0 || len(fb.sold) != 0 {
		t.Fatalf("after the late reply: %q, finished %d, buys out %d, sent %q, teed %v", got, fb.finished, c.buysOut, owner.out, fb.sold)
	}
}

// TestManyCallWaitsForItsWait: the buys of a call of many groups are told nothing until the
// WAIT after the call answers (an order id is told only once a replica holds it), then each
// its own answer; a WAIT that comes back short tells them UNAVAILABLE (not known).
func TestManyCallWaitsForItsWait(t *testing.T) {
	for _, acked := range []bool{true, false} {
		h := newCoreHarness(t, false)
		wb := &waitingBuyer{short: !acked}
		newEngine(h.k, wb, wb)
		c := h.client(true)
		h.send(c, cmdsOf("BUY a u1", "BUY b u2"))
		h.k.flushInputs()
		h.connect()
		owner := h.k.ups[upKey{addr: "a", kind: upOwner}]
		if got := string(owner.out); got != cmdsOf("BUYMANY a u1 , b u2", "WAIT 1 1000") {
			t.Fatalf("the turn: %q, want one call of two groups and its WAIT", got)
		}
		owner.out = owner.out[:0]
		owner.in = append(owner.in, manyReply(&wb.fakeBuyer, [][]byte{[]byte("a"), []byte("u1"), []byte(","), []byte("b"), []byte("u2")})...)
		h.k.upRead(owner)
		h.flush()
		if got := h.got[c].String(); got != "" {
			t.Fatalf("told before the WAIT answered: %q", got)
		}
		owner.in = append(owner.in, map[bool]string{true: ":1\r\n", false: ":0\r\n"}[acked]...)
		h.k.upRead(owner)
		h.flush()
		want := "$8\r\norder-u1\r\n$8\r\norder-u2\r\n"
		if !acked {
			want = "-UNAVAILABLE not known\r\n-UNAVAILABLE not known\r\n"
		}
		if got := h.got[c].String(); got != want || wb.finished != 2 || h.k.inflight != 0 {
			t.Fatalf("replica acknowledged %v: %q, want %q; finished %d, in flight %d", acked, got, want, wb.finished, h.k.inflight)
		}
	}
}

// TestOneSKUTurnNotMerged: a turn of one SKU's buys past guard.MaxBuysPerCall goes as calls
// of that SKU alone, not as one call of many groups.
func TestOneSKUTurnNotMerged(t *testing.T) {
	h := newCoreHarness(t, false)
	fb := &fakeBuyer{}
	newEngine(h.k, fb, fb)
	for i := range 130 { // one each: a client's window lets 4 go at first
		h.send(h.client(true), cmdsOf(fmt.Sprintf("BUY s u%d", i)))
	}
	h.k.flushInputs()
	h.connect()
	out := string(h.k.ups[upKey{addr: "a", kind: upOwner}].out)
	if n := strings.Count(out, "BUYCALL"); n != 3 || strings.Contains(out, "BUYMANY") {
		t.Fatalf("130 buys of one SKU: %d calls (%q...)", n, out[:min(len(out), 80)])
	}
}
