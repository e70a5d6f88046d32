package proxy

// Ending clients: one that shut its side, one closed or handed over, and the core's drain.

// peerShut takes a client that shut its sending side. It is closed at once when nothing is
// owed to it, or when a blocking command runs for it (as Redis forgets such a client);
// otherwise once what it sent is answered. It reports whether to close it now.
func (k *core) peerShut(c *client) bool {
	c.shut = true
	return (c.busy && c.mayBlock) || k.settled(c) == "close"
}

// settled says what to do with a client that asked to be closed or handed over, once nothing
// is owed to it: "close", "handoff", or "".
func (k *core) settled(c *client) string {
	if c.closed || c.owed() > 0 || c.busy || len(c.out) > 0 {
		return ""
	}
	switch {
	case c.closing, c.shut && !c.stalled:
		return "close"
	case c.handoff:
		return "handoff"
	}
	return ""
}

// gone forgets a client that closed or was handed over; what runs for it elsewhere is told.
func (k *core) gone(c *client) {
	c.closed = true
	c.cancel()
	// Its replies are let go at once: its commands still in flight point to it until Redis
	// answers them, and a client cut off with MiBs of unread replies must not keep them.
	c.out, c.held, c.outSkipped = nil, nil, 0
}

// drain stops taking commands: what is in flight is still answered.
func (k *core) drain(clients func(func(*client))) {
	k.draining = true
	clients(k.markDirty)
}
