package proxy

// A client's replies: what is written to it, and what is left of them after a write.

// setOut makes out (c.out with replies appended) the replies to write. An append that did
// not fit moved them to new storage, which holds none of the bytes written before: they
// must not be counted in the reply budget any longer (counted, they grew with every reply
// of a client that never quite caught up, 64 MiB for 16 reads of 4 MiB, and it was
// disconnected as if it did not read).
func (c *client) setOut(out []byte) {
	if cap(out) != cap(c.out) {
		c.outSkipped = 0
	}
	c.out = out
}

// wrote tells the core that n bytes of the client's replies went out; more: some did not.
func (k *core) wrote(c *client, n int, more bool) {
	c.out = consume(c.out, n)
	if len(c.out) > 0 {
		c.outSkipped += n // written, but held by the storage c.out is the rest of
	} else {
		c.outSkipped = 0
	}
	c.blocked = more
}

// consume drops the first n bytes of buf, which was written: the rest stays where it is (a
// reply of 100 MiB to a client that takes 64 KiB at a time must not be copied once per
// write); all written, the same storage serves again from its start (and a large one is let
// go).
func consume(buf []byte, n int) []byte {
	switch {
	case n < len(buf):
		return buf[max(n, 0):]
	case cap(buf) > 4*loopReadSize:
		return nil
	}
	return buf[:0]
}
