package router

// What an event loop asks of the router for the commands it may serve on its own thread:
// where a plain command goes straight through (Direct), the answers it may write at once
// (Immediate), the commands that need a goroutine of the connection's own (OwnGoroutine), and
// the count of what it served (Counted).

import (
	"context"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/internal/resp"
	"seckill-proxy/upstream"
)

// Direct returns the node to which Serve would hand args, for this session, straight through
// the upstream and write its reply back as it is ("" when it would not; see
// upstream.Cluster.Direct), and the slot of its keys. A server may then forward args itself
// (and count it with Counted) instead of calling Serve.
func (r *Router) Direct(s *Session, args [][]byte) (addr string, slot uint16) {
	if r.opt.Upstream == nil || s.inTx() {
		return "", 0
	}
	if s.muted() {
		return "", 0 // Serve drops its reply
	}
	_, d, err := r.check(s, args)
	if err != errPassThrough || s.rewrite != nil {
		return "", 0
	}
	if r.isLegacyKeyCommand(args) {
		return "", 0 // answered from the sale, by Serve
	}
	return r.opt.Upstream.For(s.Proto).DirectOf(args, d)
}

// StartBlocking sends args, a blocking command of s's that Serve would pass through (BLPOP,
// XREAD BLOCK, ...), to Redis at once on a connection of its own, and returns how to wait
// for its reply (see upstream.Cluster.StartBlocking); ok false: Serve must serve it. A server
// that calls it as it reads the command puts the command in Redis before anything another
// client sends later, as Redis itself would order them. ctx ends the wait (the client has
// gone). args may be reused once it returns.
func (r *Router) StartBlocking(ctx context.Context, s *Session, args [][]byte) (wait func() []byte, ok bool) {
	if r.opt.Upstream == nil || s.inTx() || s.muted() {
		return nil, false
	}
	_, _, err := r.check(s, args) // blocking commands are planned by upstream
	if err != errPassThrough || s.rewrite != nil || r.isLegacyKeyCommand(args) {
		return nil, false
	}
	w, ok := r.opt.Upstream.For(s.Proto).StartBlocking(upstream.WithBlockedOn(ctx, &s.blocked), args)
	if !ok {
		return nil, false
	}
	r.commands.Add(1)
	start := time.Now()
	s.Active(start)
	observe := r.opt.ObservePass
	if observe == nil {
		return w, true
	}
	name := CopyArgs(args[:1])
	return func() []byte {
		reply := w()
		observe(name, reply, time.Since(start))
		return reply
	}, true
}

// Immediate appends to dst the reply to args that a server may write at once, on its own
// goroutine and in its turn, instead of handing args to Serve, and says whether it did: an
// unknown command whose name is over MaxCommandName bytes, and PING and ECHO outside MULTI.
// Neither needs the router's goroutine, nor a copy of an argument of 64 MiB beyond the reply
// itself. ok false: Serve must answer (the session may need closing, say).
func (r *Router) Immediate(dst []byte, s *Session, args [][]byte) (out []byte, ok bool) {
	if len(args) == 0 || s.stale(r) {
		return dst, false
	}
	if len(args[0]) > MaxCommandName {
		r.commands.Add(1)
		return redcon.AppendError(dst, resp.UnknownCommand(args)), true
	}
	if !s.Authed || s.inTx() || len(args) > 2 {
		return dst, false
	}
	switch c := r.lookup(args[0]); {
	case c == nil || (c.name != "ping" && c.name != "echo"):
		return dst, false
	case len(args) == 2:
		r.commands.Add(1)
		return redcon.AppendBulk(dst, args[1]), true
	case c.name == "ping":
		r.commands.Add(1)
		return redcon.AppendString(dst, "PONG"), true
	}
	return dst, false // ECHO without its argument: Serve gives the arity error
}

// OwnGoroutine reports whether args is best served on a goroutine of the connection's own
// from then on: (P|S)SUBSCRIBE, which turns it into a subscriber.
func (r *Router) OwnGoroutine(args [][]byte) bool {
	if len(args) == 0 {
		return false
	}
	c := r.lookup(args[0])
	return c != nil && c.flags&flagSubscribe != 0
}

// Counted adds n commands served outside Serve to INFO's total_commands_processed.
func (r *Router) Counted(n int) { r.commands.Add(int64(n)) }
