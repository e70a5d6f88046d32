package proxy

import (
	"testing"
	"time"
)

// TestCoreHoldsPausedClients: a client whose command the pause holds sends nothing and is
// answered nothing, its later commands behind it; the loop's next deadline is the pause's
// end; at that end (or at once, forced, as CLIENT UNPAUSE does) its commands go, in order.
func TestCoreHoldsPausedClients(t *testing.T) {
	for _, force := range []bool{false, true} {
		h := newCoreHarness(t, false)
		end := h.k.now.Add(time.Second)
		h.env.pauseUntil = end
		c := h.client(true)
		h.send(c, cmdsOf("GET a1", "GET a2"))
		h.turn()
		if got := h.got[c].String(); got != "" || len(h.k.held) != 1 || !c.paused {
			t.Fatalf("paused: answered %q, %d held", got, len(h.k.held))
		}
		if next := h.k.nextDeadline(); !next.Equal(end) {
			t.Fatalf("next deadline %v, want the pause's end %v", next, end)
		}
		h.k.releaseHeld(false) // before its end: nothing
		if !c.paused {
			t.Fatal("released before the pause's end")
		}
		if force {
			h.env.pauseUntil = time.Time{}
		} else {
			h.k.now = end
		}
		h.k.releaseHeld(force)
		h.turn()
		if got, want := h.got[c].String(), echoes("GET a1", "GET a2"); got != want || len(h.k.held) != 0 || c.paused {
			t.Fatalf("after the pause (forced %v): %q, want %q; %d held", force, got, want, len(h.k.held))
		}
		if next := h.k.nextDeadline(); next.Equal(end) {
			t.Fatal("the pause's end is still a deadline")
		}
	}
}
