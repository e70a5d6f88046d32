package router

import (
	"strings"

	"seckill-proxy/internal/resp"
	"seckill-proxy/sale"
	"seckill-proxy/upstream"
)

// This file is the one place that decides whether a client's command may run. The command
// table (router.go) names what the proxy intercepts and serves itself; for everything else,
// pass decides: refused for everyone, refused for everyone but an admin allowed by
// redis.admin_allow, not carried, or passed through, after a look at the keys it writes and
// the channel it publishes to. Package upstream only routes what pass lets through.
//
// The look at the keys is a courtesy (a clear error, and no round trip); the rule that cannot
// be routed around is the Redis ACL user that pass-through connections log in as
// (redis.passthrough_username, sale.PassthroughACL): Redis checks it inside scripts,
// functions and transactions too. Without that user, every script and function is refused.
// With it, an app user's scripts are judged by what they can do (appScript, scripts.go): what
// a script writes Redis checks, but how long it runs nothing can bound once it is sent, so an
// app user may run only a script whose cost internal/luabound bounds within its budget,
// or one an admin listed in redis.app_scripts.

// refused are commands a shared proxy does not pass through: they act on whole servers or the
// cluster, or leak or change what other clients see. An admin may run those named in
// redis.admin_allow (the pass-through user's ACL still refuses FLUSHALL, FLUSHDB, SWAPDB and
// @admin commands).
var refused = map[string]string{
	"flushall": "", "flushdb": "", "config": "", "debug": "", "shutdown": "",
	"replicaof": "", "slaveof": "", "save": "",
	"bgsave": "", "bgrewriteaof": "", "acl": "", "module": "", "failover": "",
	"sync": "", "psync": "", "migrate": "", "swapdb": "", "move": "",
	"lastsave": "", "slowlog": "", "latency": "", "function": "",
}

// ReplicationError answers SYNC and PSYNC, even an admin's allowed them: the replication
// stream that follows cannot share the proxy's connections to Redis (sent on one, it held every
// command queued behind it until the node was taken for gone).
const ReplicationError = "ERR SYNC and PSYNC are not carried through seckill-proxy: a replication stream cannot share its connections to Redis; replicate from the Redis server directly"

// unsupported are connection-bound commands not carried through the proxy. (MULTI, EXEC,
// DISCARD, WATCH and UNWATCH are the router's, through Tx; (P|S)SUBSCRIBE switch the
// connection to subscriber mode; an UNSUBSCRIBE outside that mode is the router's.)
var unsupported = map[string]bool{}

// scripting are the commands that run code in Redis: what that code writes, only Redis's
// ACL can check.
var scripting = map[string]bool{
	"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true,
}

// publishing are the commands that publish on the channel in their first argument.
var publishing = map[string]bool{"publish": true, "spublish": true}

// ProtectedKeysError answers a write to a sale's key.
const ProtectedKeysError = "NOPERM a sale's keys (" + sale.SaleKeyPrefix + "<sku>}:*, " + sale.SalesKey +
	", and the seeds' " + sale.LegacyStockPrefix + "*, " + sale.LegacyBuyersPrefix + "*, " + sale.LegacyUsersPrefix + "*, " +
	sale.LegacySoldOutPrefix + "*) change only through SECKILL commands; a stock only through SECKILL.WARM"

// ProtectedChannelError answers a PUBLISH on the sales' events channel.
const ProtectedChannelError = "NOPERM " + sale.EventsChannel + " carries seckill-proxy's own messages"

// OutcomeChannelPublishError answers a PUBLISH on a buyer's outcome channel: the proxy tells
// the outcomes there itself, from the sink's.
const OutcomeChannelPublishError = "NOPERM " + sale.OutcomeChannelPrefix + "<sku>/<uid> channels carry the sink's outcomes, told by seckill-proxy"

// noScriptsError answers a script or function when there is no restricted pass-through user.
const noScriptsError = "NOPERM scripts and functions are refused: this proxy has no restricted Redis user for pass-through (redis.passthrough_username)"

// policyNames are the names any of the tables above holds: a command outside it (nearly every
// one) costs pass one map lookup before its keys are looked at.
var policyNames = func() map[string]bool {
	m := map[string]bool{"script": true}
	for _, t := range []map[string]bool{unsupported, scripting, publishing} {
		for k := range t {
			m[k] = true
		}
	}
	for k := range refused {
		m[k] = true
	}
	for k := range allocating {
		m[k] = true
	}
	return m
}()

// pass decides whether args, a command the proxy does not serve itself, may pass through for
// s: nil, or the error to answer. The description is what it learnt of a command routed
// plainly by its keys (the zero one for the special tables' commands, which upstream plans
// itself): the caller routes it from there, with no second look at the command table.
func (r *Router) pass(s *Session, cl *Class, args [][]byte) (upstream.Description, error) {
	var buf [32]byte
	name := resp.AppendLower(buf[:0], args[0])
	s.rewrite = nil
	if policyNames[string(name)] {
		if err := r.passSpecial(s, name, args); err != errNotSpecial {
			if err == nil && r.opt.Upstream != nil {
				if d := r.describe(cl, args); !d.ReadOnly {
					s.written.add(d.Keys, d.AnyArg) // a script's writes: what a WAIT must wait for
				}
			}
			return upstream.Description{}, err
		}
	}
	if r.isLegacyKeyCommand(args) {
		return upstream.Description{}, nil // not passed through: Serve answers it from the sale (legacy.go)
	}
	if r.opt.Upstream == nil {
		if namesProtected(args[1:]) {
			return upstream.Description{}, respError(ProtectedKeysError)
		}
		return upstream.Description{}, nil
	}
	d := r.describe(cl, args)
	switch {
	case d.ReadOnly:
		return d, nil
	case d.AnyArg && namesProtected(args[1:]), namesProtected(d.Keys):
		return upstream.Description{}, respError(ProtectedKeysError)
	}
	s.written.add(d.Keys, d.AnyArg) // what a WAIT of its must wait for
	return d, nil
}

// errNotSpecial: passSpecial has nothing to say of the command; its keys decide.
var errNotSpecial error = respError("not special")

// passSpecial decides for the commands in the special tables.
func (r *Router) passSpecial(s *Session, name []byte, args [][]byte) error {
	if s.Admin && killsScript(name, args) {
		return nil // a runaway script leaves Redis BUSY for everyone: an admin may always kill it
	}
	if string(name) == "sync" || string(name) == "psync" {
		return respError(ReplicationError)
	}
	if msg, ok := refused[string(name)]; ok && !(s.Admin && r.adminAllowed(name)) {
		if msg == "" {
			msg = "ERR '" + string(name) + "' is refused by seckill-proxy"
		}
		return respError(msg)
	}
	if unsupported[string(name)] {
		return respError("ERR '" + string(name) + "' is not supported through seckill-proxy yet")
	}
	restricted := r.opt.Upstream != nil && r.opt.Upstream.Restricted()
	switch {
	case string(name) == "script" && len(args) > 1:
		return r.passScript(s, name, args)
	case scripting[string(name)] || string(name) == "function":
		if !restricted {
			return respError(noScriptsError)
		}
		if !s.Admin {
			return r.appScript(s, name, args, 1)
		}
		r.judgeAdmin(s, name, args)
		return nil // what the code writes, Redis's ACL checks
	case allocating[string(name)]:
		if n := allocOf(string(name), args); r.opt.MaxAllocBytes > 0 && n > int64(r.opt.MaxAllocBytes) {
			return allocError(string(name), n, r.opt.MaxAllocBytes)
		}
		return errNotSpecial
	case publishing[string(name)]:
		if len(args) > 1 && sale.ProtectedChannel(args[1]) {
			return respError(ProtectedChannelError)
		}
		if len(args) > 1 && sale.IsOutcomeChannel(args[1]) {
			return respError(OutcomeChannelPublishError)
		}
		return nil
	}
	return errNotSpecial
}

// passScript decides for SCRIPT <sub> ...: LOAD and EXISTS for everyone (an app user's LOAD
// judged as its EVAL would be), the others for an admin allowed them.
func (r *Router) passScript(s *Session, name []byte, args [][]byte) error {
	sub := resp.AppendLower(nil, args[1])
	if string(sub) != "load" && string(sub) != "exists" && !(s.Admin && r.adminAllowed(name)) {
		return respError("ERR 'script|" + string(sub) + "' is refused by seckill-proxy")
	}
	switch {
	case string(sub) == "load" && len(args) == 3 && s.Admin:
		r.judgeAdmin(s, []byte("eval"), args[1:])
	case string(sub) == "load" && len(args) == 3:
		return r.scriptLoad(s, args)
	case string(sub) == "exists" && !s.Admin:
		r.scriptExists(s, args)
	}
	return nil
}

// killsScript: args is SCRIPT KILL or FUNCTION KILL.
func killsScript(name []byte, args [][]byte) bool {
	return (string(name) == "script" || string(name) == "function") && len(args) == 2 && strings.EqualFold(string(args[1]), "kill")
}

func (r *Router) adminAllowed(name []byte) bool {
	for _, a := range r.opt.AdminAllow {
		if strings.EqualFold(a, string(name)) {
			return true
		}
	}
	return false
}

// namesProtected reports whether any of args is a sale's key.
func namesProtected(args [][]byte) bool {
	for _, a := range args {
		if sale.Protected(a) {
			return true
		}
	}
	return false
}
