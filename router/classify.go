package router

// What a server does with each command a client sends is decided here, once per command: its
// class (Classify), which carries what the decision looked up (the router's entry, Redis's
// description) to the call that acts on it, so that nothing is looked up twice. An event
// loop serves some kinds on its own thread: a buy (ParseBuy), a command that goes straight
// to a node (KindDirect), an answer it may write at once (AppendImmediate), a blocking
// command sent at once (StartBlocking); everything else goes through Serve.

import (
	"context"
	"strconv"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/internal/resp"
	"seckill-proxy/upstream"
)

// Kind is what a server does with a command.
type Kind uint8

const (
	// KindServe: Serve runs it, on a goroutine: the proxy's own commands, transactions, what
	// must go to Redis changed, and whatever the kinds below do not take.
	KindServe Kind = iota
	// KindBuy: a SECKILL.BUY, or a legacy script's call, for the buy engine (ParseBuy).
	KindBuy
	// KindDirect: a pass-through command that goes to Class.Addr as it is, its reply back
	// untouched (see upstream.Cluster.Direct).
	KindDirect
	// KindImmediate: its reply may be written at once, on the server's own goroutine and in
	// its turn (AppendImmediate): an unknown command whose name is over MaxCommandName bytes,
	// and PING and ECHO outside MULTI.
	KindImmediate
	// KindBlocking: a pass-through command that may block (BLPOP, XREAD BLOCK, ...), which
	// StartBlocking may send at once.
	KindBlocking
	// KindOwnGoroutine: (P|S)SUBSCRIBE and MONITOR, which make the connection one served by a
	// goroutine of its own from then on.
	KindOwnGoroutine
)

// Class is what Classify decided of one command. It points into the command's arguments: it
// is not to be kept past them.
type Class struct {
	Kind Kind
	// Addr and Slot: a KindDirect command's node, and the slot of its keys in front of a
	// cluster.
	Addr string
	Slot uint16
	// Blocks: the command may wait for what other clients do, whatever its kind: Redis's
	// table flags it blocking, or it is WAIT, WAITAOF or SECKILL.STATUS ... WAIT.
	Blocks bool

	// known: cmd is the router's entry for the command (nil: none, it passes through).
	known bool
	cmd   *command
	// described: desc is Redis's description of it (a command that passes through).
	described bool
	desc      upstream.Description
}

// Identify is what args is by its name and arguments alone: its entry in the router's table,
// or Redis's description of a command that passes through. One look-up each, whatever the
// session; Classify and Serve decide from it.
func (r *Router) Identify(args [][]byte) Class {
	cl := Class{known: true}
	if len(args) == 0 || len(args[0]) > MaxCommandName {
		return cl
	}
	cl.cmd = r.lookup(args[0])
	r.lookups.Add(1)
	switch c := cl.cmd; {
	case c != nil:
		cl.Blocks = c.flags&flagBlocks != 0 || (c.name == "seckill.status" && len(args) == 5)
	case r.opt.Upstream != nil:
		cl.desc, cl.described = r.opt.Upstream.Describe(args), true
		cl.Blocks = cl.desc.Blocking
	}
	return cl
}

// Own says whether the command is one the router serves itself (SECKILL.*, AUTH, MULTI, ...),
// not one that passes through to Redis.
func (cl Class) Own() bool { return cl.cmd != nil }

// Unbound is cl without what points into its command's arguments (Redis's description), for
// a copy of them that Serve runs later: the router's entry stays, the description is made
// again from the copy.
func (cl Class) Unbound() Class {
	cl.described, cl.desc = false, upstream.Description{}
	return cl
}

// Classify decides what a server does with args, a command of s's, now. A pass-through
// command that might go straight to a node, or start blocking, is checked against the
// policy here (as Serve checks it), and only then given that kind.
func (r *Router) Classify(s *Session, args [][]byte) Class {
	cl := r.Peek(s, args)
	switch {
	case len(args) == 0 || cl.Kind != KindServe:
	case r.isImmediate(s, &cl, args):
		cl.Kind = KindImmediate
	case cl.cmd == nil && r.opt.Upstream != nil && !s.inTx() && !s.muted():
		r.classifyPass(s, &cl, args)
	}
	return cl
}

// Peek is Classify for a command that waits behind others of its client (gathered into one
// batch for Serve): only whether it is a buy or changes how the connection is served, and
// whether it may block. Nothing is checked, so nothing of the session changes before the
// commands before it run.
func (r *Router) Peek(s *Session, args [][]byte) Class {
	cl := r.Identify(args)
	switch c := cl.cmd; {
	case len(args) == 0:
	case r.isBuyFor(s, &cl, args):
		cl.Kind = KindBuy
	case c != nil && c.flags&flagSubscribe != 0 && (c.name == "monitor" || r.channelBytes(args) == nil):
		cl.Kind = KindOwnGoroutine // (over limits.max_channel_bytes: Serve refuses it)
	}
	return cl
}

// isBuyFor: args is a SECKILL.BUY (or a legacy script's call) that a server may run itself
// rather than through Serve: not inside MULTI, of a session that needs no recheck.
func (r *Router) isBuyFor(s *Session, cl *Class, args [][]byte) bool {
	if r.guard == nil || s.inTx() || s.stale(r) {
		return false // a stale session goes through Serve, which closes it if it must
	}
	return (cl.cmd != nil && cl.cmd.flags&flagBuy != 0) || (r.legacy != nil && r.legacy.isLegacyCall(args))
}

// isImmediate: args's reply may be written at once (KindImmediate).
func (r *Router) isImmediate(s *Session, cl *Class, args [][]byte) bool {
	switch c := cl.cmd; {
	case s.stale(r):
		return false
	case len(args[0]) > MaxCommandName:
		return true
	case !s.Authed || s.inTx() || len(args) > 2 || c == nil:
		return false
	}
	return cl.cmd.name == "ping" || (cl.cmd.name == "echo" && len(args) == 2)
}

// classifyPass gives a pass-through command that the policy lets through as it is its
// kind: KindDirect when it goes to one node as it is, KindBlocking when it may block.
func (r *Router) classifyPass(s *Session, cl *Class, args [][]byte) {
	if r.unjudged(s, args) {
		return // Serve judges it, on a goroutine: an event loop never runs the script checker
	}
	_, d, err := r.check(s, cl, args)
	if err != errPassThrough || s.rewrite != nil || r.isLegacyKeyCommand(args) {
		return // Serve answers it: refused, rewritten, or from the sale (legacy.go)
	}
	if addr, slot := r.opt.Upstream.For(s.Proto).DirectOf(args, d); addr != "" {
		cl.Kind, cl.Addr, cl.Slot = KindDirect, addr, slot
		return
	}
	if cl.Blocks {
		cl.Kind = KindBlocking
	}
}

// AppendImmediate appends the reply to args, a KindImmediate command, to dst. Neither needs
// the router's goroutine, nor a copy of an argument of 64 MiB beyond the reply itself.
func (r *Router) AppendImmediate(dst []byte, args [][]byte) []byte {
	r.commands.Add(1)
	switch {
	case len(args[0]) > MaxCommandName:
		return redcon.AppendError(dst, resp.UnknownCommand(args))
	case len(args) == 2:
		return redcon.AppendBulk(dst, args[1])
	}
	return redcon.AppendString(dst, "PONG")
}

// StartBlocking sends args, a KindBlocking command of s's, to Redis at once on a connection of
// its own, and returns how to wait for its reply (see upstream.Cluster.StartBlocking); ok
// false: Serve must serve it. A server that calls it as it reads the command puts the
// command in Redis before anything another client sends later, as Redis itself would order
// them. ctx ends the wait (the client has gone). args may be reused once it returns.
func (r *Router) StartBlocking(ctx context.Context, s *Session, cl Class, args [][]byte) (wait func() []byte, ok bool) {
	if cl.Kind != KindBlocking {
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

// Counted adds n commands served outside Serve to INFO's total_commands_processed.
func (r *Router) Counted(n int) { r.commands.Add(int64(n)) }

// check checks args, a command of s's identified as cl (Identify, unless cl is unknown yet),
// for auth, arity and the policy: the router's own command, or errPassThrough with Redis's
// description of a command that passes through (when pass lets it), which routes it from
// there.
func (r *Router) check(s *Session, cl *Class, args [][]byte) (*command, upstream.Description, error) {
	if !cl.known {
		*cl = r.Identify(args)
	}
	c, err := r.checkOwn(s, cl.cmd, args)
	if c != nil || err != nil {
		return c, upstream.Description{}, err
	}
	d, err := r.pass(s, cl, args)
	switch {
	case err != nil:
		return nil, upstream.Description{}, err
	case r.opt.Upstream == nil:
		return nil, upstream.Description{}, respError(resp.UnknownCommand(args))
	}
	return nil, d, errPassThrough
}

// checkOwn is check but for pass: c, the router's entry for args, if s may run it, or nil
// (nil error) for a command that pass decides.
func (r *Router) checkOwn(s *Session, c *command, args [][]byte) (*command, error) {
	if len(args) == 0 {
		return nil, respError("ERR empty command")
	}
	if s.creds != r.creds.Load() {
		r.recheck(s)
	}
	switch {
	case s.denied:
		s.Quit = true
		return nil, errProtectedMode
	case s.revoked:
		s.Quit = true
		return nil, errRevoked
	case len(args[0]) > MaxCommandName:
		return nil, respError(resp.UnknownCommand(args))
	}
	if r.opt.MaxArgBytes > 0 {
		for _, a := range args {
			if len(a) > r.opt.MaxArgBytes {
				return nil, respError("ERR argument of " + strconv.Itoa(len(a)) + " bytes is above limits.max_arg_bytes")
			}
		}
	}
	if !s.Authed && (c == nil || c.flags&flagNoAuth == 0) {
		return nil, respError("NOAUTH Authentication required.")
	}
	if c != nil && c.flags&flagTx != 0 && r.opt.Upstream == nil {
		c = nil
	}
	if c == nil {
		return nil, nil
	}
	if c.flags&flagAdmin != 0 && !s.Admin {
		return nil, respError("NOPERM User " + s.User + " has no permissions to run the '" + c.name + "' command")
	}
	if (c.arity > 0 && len(args) != c.arity) || (c.arity < 0 && len(args) < -c.arity) || (c.maxArgs > 0 && len(args) > c.maxArgs) {
		return nil, respError("ERR wrong number of arguments for '" + c.name + "' command")
	}
	return c, nil
}

// describe is Redis's description of args, a command that passes through, identified as cl:
// made once.
func (r *Router) describe(cl *Class, args [][]byte) upstream.Description {
	if !cl.described {
		cl.desc, cl.described = r.opt.Upstream.Describe(args), true
	}
	return cl.desc
}
