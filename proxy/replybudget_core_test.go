package proxy

import (
	"bytes"
	"testing"
)

// TestReplyBudgetCountsStorage: a client that reads its replies, but never all of them before
// the next one comes, is counted in the reply budget for the storage that holds its unread
// replies, not for every byte ever written to it (a count that grew with each reply once an
// append moved the replies to new storage: 16 reads of 4 MiB, read as fast as they came,
// were 64 MiB and disconnected the client as one that does not read).
func TestReplyBudgetCountsStorage(t *testing.T) {
	h := newCoreHarness(t, false)
	c := h.client(true)
	b := &replyBudget{limit: 32 << 20}
	reply := bytes.Repeat([]byte("x"), 1<<20)
	for i := range 64 {
		h.k.reply(c, reply)
		// The client takes a little more than one reply's worth each turn, never all.
		h.k.wrote(c, min(len(c.out)-1, len(reply)+len(reply)/8), true)
		if b.hold(c) {
			t.Fatalf("reply %d: disconnected with %d bytes unread", i, len(c.out))
		}
		if held := b.held.Load(); held > 4*int64(len(reply)) {
			t.Fatalf("reply %d: %d bytes unread, counted as %d", i, len(c.out), held)
		}
	}
	b.release(c)
	if held := b.held.Load(); held != 0 {
		t.Fatalf("released, the budget still counts %d", held)
	}
}
