package router

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/internal/resp"
	"seckill-proxy/upstream"
)

// Flags of a command.
const (
	// flagNoAuth: allowed before AUTH.
	flagNoAuth = 1 << iota
	// flagBuy: SECKILL.BUY, batched with its neighbours into one pipeline.
	flagBuy
	// flagAdmin: only for users with the admin role.
	flagAdmin
	// flagTx: a transaction command, served only with an upstream.
	flagTx
	// flagSubscribe: switches the connection to subscriber mode (with an upstream).
	flagSubscribe
	// flagQueued: inside MULTI, queued and sent to Redis with the transaction, as Redis
	// queues it (PING, ECHO, SELECT 0, INFO, COMMAND): its reply is Redis's, in EXEC's array.
	flagQueued
	// flagBlocks: it waits for what others do (WAIT, WAITAOF: the replicas).
	flagBlocks
)

// handler serves one command: parse args, run the operation, return the reply.
type handler func(ctx context.Context, s *Session, args [][]byte) (Reply, error)

// command is one row of the command table.
type command struct {
	name string // lower case, as Redis names it in errors
	// arity counts the name: positive means exactly, negative means at least.
	arity int
	// maxArgs, when above 0, is the most arguments (name included).
	maxArgs int
	flags   int
	handler handler
}

// Session is one client connection's state. The proxy makes one per connection; it is used
// by that connection's goroutine only.
type Session struct {
	ID     int64
	Name   string
	Authed bool
	// TLS: the client came in over TLS (tls_listen): the cluster facade gives it the TLS
	// address (SetTLSAnnounce).
	TLS bool
	// User is the user logged in ("default" before AUTH); Admin says whether it has the
	// admin role.
	User    string
	Admin   bool
	LibName string
	LibVer  string
	// Proto is the RESP version the client speaks: 2, or 3 after HELLO 3. Pass-through
	// commands then go on connections to Redis that speak it too.
	Proto int
	// Quit is set by QUIT (or too many failed AUTHs): the proxy closes the connection after
	// writing the reply.
	Quit bool
	// Remote is the client's address, for logs.
	Remote string
	// authFailures counts the AUTHs that failed in a row.
	authFailures int
	// uidLessCalls counts the calls of legacy scripts with no buyer (buy.legacy_uidless).
	uidLessCalls int64
	// creds are the credentials the login was checked against, and login the entry it
	// matched: a reload that removes it revokes the session (see recheck).
	creds *credentials
	login conf.User
	// denied: protected mode refused the client (no credentials, not on loopback); revoked:
	// a reload took its login away. Both answer every command with an error and close.
	denied, revoked bool

	// tx is the connection's MULTI/WATCH state, made on first use.
	tx *upstream.Tx
	// Subscribe is set by (P|S)SUBSCRIBE: the proxy then turns the connection into a
	// subscriber of its own upstream, and hands it Subscribe and the rest of the pipeline
	// (SubscribeRest), copied.
	Subscribe     [][]byte
	SubscribeRest [][][]byte

	// view is what other connections see of this one (CLIENT LIST, CLIENT KILL).
	view clientView
	// written are the slots its commands may have written since its last WAIT.
	written writtenSlots
	// blocked is where its blocking command waits in Redis, for another client's CLIENT
	// UNBLOCK.
	blocked upstream.BlockedOn
	// replyOff and skipNext are CLIENT REPLY OFF and SKIP's: no reply for the commands until
	// CLIENT REPLY ON, or for the next one. A muted session's commands all go through Serve
	// (stale, Direct), which drops their replies one command at a time.
	replyOff, skipNext bool
	// rewrite is set by the check of a pass-through command that must go to Redis changed (an
	// app user's script, rewritten; scripts.go): such a command goes through Serve, never Direct.
	rewrite *rewrite
	// judging is the time spent judging this connection's new scripts (scripts.go).
	judging judgeTime

	// Buffers for a pipeline's buys, reused from one read to the next.
	buys    []guard.BuyRequest
	buyErrs []error
}

// Options configure a Router.
type Options struct {
	// Password, when set, is the default user's: AUTH <password> gives every command.
	// With neither Password nor Users, every client may run every command without AUTH.
	Password string
	// Users are named users (AUTH <user> <password>) with the app or admin role.
	Users []conf.User
	// Clients reports the number of connected clients, for INFO; nil reports 0.
	Clients func() int64
	// Extra adds lines to INFO's seckill section (the tee's counters, say); nil adds none.
	Extra func() []guard.Field
	// ObservePass takes each pass-through command Serve sent upstream with its reply, and how
	// long the batch it went in took (nil: none).
	ObservePass func(args [][]byte, reply []byte, d time.Duration)
	// Upstream passes every command the proxy does not serve itself through to Redis, and
	// returns Redis's raw replies; nil answers them "unknown command".
	Upstream *upstream.Cluster
	// CompatReplies answers BUY with the seeds' integers: 1 success, 0 sold out, -1 duplicate.
	CompatReplies bool
	// Legacy recognises the seeds' stock scripts (EVAL, EVALSHA on seckill:stock:<sku>) and
	// runs each call as a SECKILL.BUY (see legacy.go).
	Legacy bool
	// LegacyScripts are more scripts to recognise (conf's buy.legacy).
	LegacyScripts []conf.LegacyScript
	// LegacyUIDLess runs legacy scripts that name no buyer (the seeds' deduct) as buys, each
	// call a new buyer, admitted as the logged-in user, at most LegacyUIDLessPerConn calls a
	// connection; off, they are refused.
	LegacyUIDLess        bool
	LegacyUIDLessPerConn int64
	// MaxArgBytes is the largest argument accepted; 0 means no bound.
	MaxArgBytes int
	// MaxAllocBytes is the most one command may make Redis allocate by its arguments
	// (alloc.go); 0 means no bound.
	MaxAllocBytes int
	// MaxChannelBytes bounds the channel names of one (P|S)SUBSCRIBE (the server bounds what a
	// connection holds in all); 0 means no bound.
	MaxChannelBytes int
	// AdminAllow names refused commands that an admin user may run all the same.
	AdminAllow []string
	// AppScripts are the SHA1s of the scripts an app user may run; "*": any (conf's
	// redis.app_scripts).
	AppScripts []string
	// AppScriptFuel, AppScriptBytes and AppScriptTime are what an app user's script may spend
	// at run time (redis.app_script_fuel, redis.app_script_bytes, redis.app_script_time):
	// internal/luabound's meter. A fuel of 0 refuses a script that loops on a value; bytes of 0
	// send the scripts unmetered (fueled only where they must be).
	AppScriptFuel  int
	AppScriptBytes int
	AppScriptTime  time.Duration
	// ProtectedMode refuses clients from outside loopback while there are no credentials.
	ProtectedMode bool
	// MaxStatusWait bounds SECKILL.STATUS ... WAIT (status.max_wait; 0: conf's default).
	MaxStatusWait time.Duration
	// WaitShare is the most SECKILL.STATUS ... WAIT one user, and one client address, may
	// have waiting at once (limits.client_share of status.max_waiters; 0: no bound) while
	// others may want them: past it, a WAIT is refused when fewer than a share of MaxWaiters
	// (status.max_waiters; 0: the share is hard) are left.
	WaitShare  int
	MaxWaiters int
}

// errPassThrough marks a command for the upstream. (An error value made once: returning a
// respError would box it on every command.)
var errPassThrough error = respError("pass through")

// Router holds the command table and serves a client's commands. It is safe for concurrent
// use once built with New.
type Router struct {
	ident  identityCache // the upstream's version and mode, for HELLO
	table  map[string]*command
	guard  *guard.Guard
	buys   BuyEngine // runs Serve's buys (nil: they are answered UNAVAILABLE)
	log    *zap.Logger
	opt    Options
	creds  atomic.Pointer[credentials] // SetCredentials changes them while serving
	nextID atomic.Int64
	// sessions are the connections open now, by ID, for CLIENT LIST and CLIENT KILL.
	sessions sync.Map
	// legacy recognises the seeds' stock scripts; nil when buy.legacy_scripts is off.
	legacy *legacyScripts
	// announce is the cluster facade's node (SetAnnounce); tlsAnnounce, its node for clients
	// that came in over TLS (SetTLSAnnounce).
	announce    atomic.Pointer[announce]
	tlsAnnounce atomic.Pointer[announce]
	commands    atomic.Int64
	// lookups counts the commands looked up in the table (Identify): one per command served.
	lookups atomic.Int64
	started time.Time
	auth    authStats
	// appScripts is Options.AppScripts as a set, SHA1s lower-cased; verdicts are the app
	// users' scripts judged (scripts.go), scriptLog the pace of the log of refusals.
	appScripts map[string]bool
	verdicts   verdicts
	scriptLog  rate.Sometimes
	// waitShares bounds each user's and client address's SECKILL.STATUS ... WAIT.
	waitShares *guard.Shares
	pause      pause    // CLIENT PAUSE of this proxy's clients (pause.go)
	mon        monitors // its MONITOR clients (monitor.go)
}

// New builds the command table once.
func New(g *guard.Guard, log *zap.Logger, opt Options) *Router {
	r := &Router{guard: g, log: log, opt: opt, started: time.Now()}
	r.SetCredentials(opt.Password, opt.Users)
	r.appScripts = map[string]bool{}
	for _, s := range opt.AppScripts {
		r.appScripts[strings.ToLower(s)] = true
	}
	if opt.Legacy && g != nil {
		r.legacy = newLegacyScripts(opt.LegacyScripts)
	}
	r.auth.log = rate.Sometimes{Interval: time.Second}
	r.scriptLog = rate.Sometimes{Interval: 10 * time.Second}
	r.waitShares = guard.NewShares(opt.WaitShare, opt.MaxWaiters)
	r.auth.sources = newFailureLimits(authSourceEvery, authSourceBurst)
	r.auth.users = newFailureLimits(authUserEvery, authUserBurst)
	r.auth.now = time.Now
	r.table = map[string]*command{}
	for _, c := range []*command{
		{name: "ping", arity: -1, maxArgs: 2, flags: flagQueued, handler: cmdPing},
		{name: "echo", arity: 2, flags: flagQueued, handler: cmdEcho},
		{name: "quit", arity: -1, flags: flagNoAuth, handler: cmdQuit},
		{name: "select", arity: 2, flags: flagQueued, handler: cmdSelect},
		{name: "hello", arity: -1, flags: flagNoAuth, handler: r.cmdHello},
		{name: "auth", arity: -2, maxArgs: 3, flags: flagNoAuth, handler: r.cmdAuth},
		{name: "client", arity: -2, handler: r.cmdClient},
		{name: "cluster", arity: -2, handler: r.cmdCluster},
		{name: "readonly", arity: 1, handler: cmdOK},
		{name: "readwrite", arity: 1, handler: cmdOK},
		{name: "asking", arity: 1, handler: cmdOK},
		{name: "command", arity: -1, flags: flagQueued, handler: r.cmdCommand},
		{name: "info", arity: -1, flags: flagQueued, handler: r.cmdInfo},
		{name: "multi", arity: 1, flags: flagTx, handler: r.cmdMulti},
		{name: "exec", arity: 1, flags: flagTx, handler: r.cmdExec},
		{name: "discard", arity: 1, flags: flagTx, handler: r.cmdDiscard},
		{name: "watch", arity: -2, flags: flagTx, handler: r.cmdWatch},
		{name: "unwatch", arity: 1, flags: flagTx, handler: r.cmdUnwatch},
		{name: "subscribe", arity: -2, flags: flagTx | flagSubscribe, handler: r.cmdSubscribe},
		{name: "psubscribe", arity: -2, flags: flagTx | flagSubscribe, handler: r.cmdSubscribe},
		{name: "ssubscribe", arity: -2, flags: flagTx | flagSubscribe, handler: r.cmdSubscribe},
		{name: "reset", arity: 1, flags: flagNoAuth, handler: r.cmdReset},
		{name: "monitor", arity: 1, flags: flagSubscribe, handler: r.cmdMonitor},
		{name: "wait", arity: 3, flags: flagQueued | flagBlocks, handler: r.cmdWait},
		{name: "waitaof", arity: -1, flags: flagQueued | flagBlocks, handler: r.cmdWait}, // Redis before 7.2 does not know it: its answer
		{name: "unsubscribe", arity: -1, flags: flagQueued, handler: cmdUnsubscribe},
		{name: "punsubscribe", arity: -1, flags: flagQueued, handler: cmdUnsubscribe},
		{name: "sunsubscribe", arity: -1, flags: flagQueued, handler: cmdUnsubscribe},
		{name: "seckill.buy", arity: -3, maxArgs: 4, flags: flagBuy},
		{name: "seckill.status", arity: -3, maxArgs: 5, handler: r.cmdStatus},
		{name: "seckill.info", arity: -1, maxArgs: 2, handler: r.cmdSaleInfo},
		{name: "seckill.warm", arity: -2, flags: flagAdmin, handler: r.cmdWarm},
		{name: "seckill.close", arity: 2, flags: flagAdmin, handler: r.cmdClose},
		{name: "seckill.release", arity: 3, flags: flagAdmin, handler: r.cmdRelease},
		{name: "seckill.check", arity: 2, flags: flagAdmin, handler: r.cmdCheck},
		{name: "seckill.limit", arity: -4, maxArgs: 6, flags: flagAdmin, handler: r.cmdLimit},
		{name: "seckill.deny", arity: -2, maxArgs: 4, flags: flagAdmin, handler: r.cmdDeny},
		{name: "seckill.allow", arity: 2, flags: flagAdmin, handler: r.cmdAllow},
	} {
		r.table[c.name] = c
	}
	return r
}

// inTx: the session is inside MULTI.
func (s *Session) inTx() bool { return s.tx != nil && s.tx.Active() }

// NewSession returns the state of a new connection. With no password and no users, it is
// the default user with every right; otherwise it must AUTH first.
//
// With protected_mode and no credentials, a client whose remote address is not on loopback is
// refused: every command answers -DENIED and the connection closes.
func (r *Router) NewSession(remote string) *Session {
	creds := r.creds.Load()
	open := creds.open()
	s := &Session{ID: r.nextID.Add(1), Authed: open, Admin: open, User: "default", Proto: 2, Remote: remote, creds: creds}
	if open {
		s.login = conf.User{Name: "default", Role: conf.RoleAdmin}
		s.denied = r.opt.ProtectedMode && !onLoopback(remote)
	}
	s.view.created = time.Now()
	s.view.user = s.User
	s.view.multi.Store(-1)
	s.Active(s.view.created)
	r.sessions.Store(s.ID, s)
	return s
}

// MaxCommandName is the longest command name the proxy looks up or passes on: Redis's own
// are under 32 bytes, and a module's rarely longer. A longer one is answered as an unknown
// command at once, as Redis would answer it, without a copy of it being made or sent on, so
// that a 64 MiB name costs its reading and nothing more (Immediate).
const MaxCommandName = 256

// lookup finds a command by name, case-insensitively, without allocating.
func (r *Router) lookup(name []byte) *command {
	if len(name) > MaxCommandName {
		return nil
	}
	if c, ok := r.table[string(name)]; ok {
		return c
	}
	var buf [32]byte
	return r.table[string(resp.AppendLower(buf[:0], name))]
}

// Serve runs one client pipeline, cmds, writing one reply per command to w, in order.
// Consecutive SECKILL.BUY commands go to Redis as one batch, and so do consecutive
// pass-through commands. cmds may point into a buffer that the caller reuses once Serve
// returns: what must outlive the call is copied. Each command is classified (a legacy stock
// call or key command, a command queued in MULTI, a buy, a pass-through command, the proxy's
// own), then dispatched.
func (r *Router) Serve(ctx context.Context, s *Session, cmds [][][]byte, w Writer) {
	r.ServeIdentified(ctx, s, cmds, nil, w)
}

// ServeIdentified is Serve for commands a server identified already (ids[i] is cmds[i]'s,
// from Identify, Classify or Peek, of the same arguments or Unbound): none is looked up again.
// ids may be nil, or shorter than cmds.
func (r *Router) ServeIdentified(ctx context.Context, s *Session, cmds [][][]byte, ids []Class, w Writer) {
	b := &batch{r: r, s: s, ctx: ctx, w: w, buys: s.buys[:0], buyErrs: s.buyErrs[:0]}
	defer func() {
		s.buys, s.buyErrs = b.buys[:0], b.buyErrs[:0]
		if s.tx != nil {
			s.view.multi.Store(int64(s.tx.Queued()))
		}
	}()
	r.commands.Add(int64(len(cmds)))
	s.Active(time.Now())
	for i, args := range cmds {
		var cl Class
		if i < len(ids) {
			cl = ids[i]
		}
		if s.muted() {
			s.skipNext = false // this is the command skipped
			r.serveMuted(b, args, cl)
		} else {
			r.serveOne(b, args, cl)
		}
		if s.Quit {
			return
		}
		if s.Subscribe != nil {
			for _, rest := range cmds[i+1:] {
				s.SubscribeRest = append(s.SubscribeRest, CopyArgs(rest))
			}
			return
		}
	}
	b.flush()
}

// serveOne classifies one command (identified as cl, unless cl is unknown) and dispatches it.
func (r *Router) serveOne(b *batch, args [][]byte, cl Class) {
	s := b.s
	r.Monitored(s, args)
	if !cl.known {
		cl = r.Identify(args)
	}
	if r.legacy != nil && (cl.cmd == nil || cl.cmd.flags&flagBuy == 0) && r.serveLegacy(b, args) {
		return
	}
	c, desc, err := r.check(s, &cl, args)
	var answer []byte
	if err == errPassThrough && s.rewrite != nil {
		args, answer, desc = s.rewrite.apply(args), s.rewrite.answer, upstream.Description{}
	}
	if err == errPassThrough && r.legacy != nil {
		if reply, lerr, ok := r.legacyKeyCommand(b.ctx, args); ok {
			b.flush()
			b.write(reply, lerr)
			return
		}
	}
	if c != nil {
		s.view.mu.Lock()
		s.view.lastCmd = c.name
		s.view.mu.Unlock()
	}
	switch {
	case s.inTx() && queueable(c, err, args):
		b.addQueued(args)
	case s.inTx() && (err != nil || (c.flags&flagTx == 0 && c.name != "quit" && c.name != "reset")):
		b.flush()
		r.queue(b.ctx, s, c, err, args, b.w)
	case err == errPassThrough:
		b.addPass(args, answer, desc)
	case err == nil && c.flags&flagBuy != 0:
		b.addBuy(guard.ParseBuy(args[1:]))
	case err == nil && c.name == "seckill.warm":
		b.addWarm(args)
	default:
		b.flush()
		if err != nil {
			WriteError(b.w, err)
			return
		}
		reply, err := c.handler(b.ctx, s, args)
		b.write(reply, err)
	}
}
