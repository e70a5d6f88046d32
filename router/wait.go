package router

import (
	"context"

	"seckill-proxy/upstream"
)

// writtenSlots are the slots a session may have written since its last WAIT: Redis's WAIT
// waits for the writes of the connection that asks, and through the proxy those went to
// whatever masters took them (see upstream.Cluster.Wait).
type writtenSlots struct {
	slots [8]uint16
	n     int
	// all: more slots than that, or a write whose keys Redis's table cannot name (a script,
	// a command it does not know): every master is asked.
	all bool
}

// add records a write of keys (anyArg: of keys the table cannot name).
func (w *writtenSlots) add(keys [][]byte, anyArg bool) {
	if w.all {
		return
	}
	if anyArg || len(keys) == 0 {
		w.all = true
		return
	}
next:
	for _, k := range keys {
		s := upstream.Slot(k)
		for _, have := range w.slots[:w.n] {
			if have == s {
				continue next
			}
		}
		if w.n == len(w.slots) {
			w.all = true
			return
		}
		w.slots[w.n] = s
		w.n++
	}
}

// cmdWait serves WAIT and WAITAOF: on every master the session wrote to since its last WAIT
// (or every master), as Redis would for the writes of one connection. Inside MULTI it is
// queued and runs in the transaction, on its connection, as in Redis.
func (r *Router) cmdWait(ctx context.Context, s *Session, args [][]byte) (Reply, error) {
	if r.opt.Upstream == nil {
		return nil, respError("ERR WAIT needs Redis behind the proxy")
	}
	w := s.written
	s.written = writtenSlots{}
	return rawReply(r.opt.Upstream.For(s.Proto).Wait(ctx, w.slots[:w.n], w.all, args)), nil
}
