package upstream

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/internal/resp"
)

// plan is how one command is passed through: a reply made here, a special handler, or the
// node to send it to (any master, for a command without keys).
type plan struct {
	reply     []byte
	special   func(ctx context.Context) []byte
	addr      string
	slot      uint16 // of the keys, when addr is a cluster node's
	anyMaster bool
	// ownDeadline: special runs in the client's context, not under the command timeout (a
	// blocking command takes its own timeout).
	ownDeadline bool
}

// splittable are multi-key commands whose keys may span slots: they are split per slot and
// their replies merged into the one Redis would give.
var splittable = map[string]bool{"mget": true, "mset": true, "del": true, "unlink": true, "exists": true, "touch": true}

// planDescribed is plan for args as Describe described them (d): a command routed plainly
// by its keys is routed from d, without a second look-up; any other is planned by table.
func (c *Cluster) planDescribed(ctx context.Context, table *commandTable, args [][]byte, d Description) plan {
	if d.plain.ci == nil {
		return c.plan(ctx, table, args)
	}
	if !c.verified.Load() {
		return plan{reply: unavailable(errACLUnverified)}
	}
	return c.routeByKeys(ctx, d.plain.ci.Name, d.plain, args, d.Keys)
}

// plan routes a command that the router's policy has let through.
func (c *Cluster) plan(ctx context.Context, table *commandTable, args [][]byte) plan {
	if !c.verified.Load() {
		return plan{reply: unavailable(errACLUnverified)}
	}
	var buf [32]byte
	lname := resp.AppendLower(buf[:0], args[0])
	if cf, ok := table.plain[string(lname)]; ok {
		// The common case: one map lookup, and no allocation for the name or the keys.
		return c.routeByKeys(ctx, cf.ci.Name, cf, args, positionalKeys(cf.ci, args))
	}
	ci := table.info[string(lname)]
	name := string(lname)
	switch name {
	case "dbsize":
		return plan{special: func(ctx context.Context) []byte { return c.sumOverMasters(ctx, args) }}
	case "scan":
		return plan{special: func(ctx context.Context) []byte { return c.scan(ctx, args) }}
	case "keys":
		return plan{special: func(ctx context.Context) []byte { return c.keys(ctx, args) }}
	case "randomkey":
		return plan{special: func(ctx context.Context) []byte { return c.randomKey(ctx, args) }}
	case "slowlog":
		return plan{special: func(ctx context.Context) []byte { return c.slowlog(ctx, args) }}
	case "latency":
		return plan{special: func(ctx context.Context) []byte { return c.latency(ctx, args) }}
	case "publish", "pubsub":
		// The pub/sub home, where channels and patterns are subscribed (see subscribe.go),
		// unless it is PUBSUB of shard channels, which read one master.
		if name == "pubsub" && (len(args) < 2 || strings.HasPrefix(strings.ToLower(string(args[1])), "shard")) {
			break
		}
		addr, err := c.pubsubHome(ctx)
		if err != nil {
			return plan{reply: unavailable(err)}
		}
		return plan{addr: addr}
	case "debug":
		if len(args) < 2 {
			return plan{reply: errorReply("ERR wrong number of arguments for 'debug' command")}
		}
		switch sub := strings.ToLower(string(args[1])); {
		case sub == "digest" && len(args) == 2 && c.opt.Standalone == "":
			return plan{special: func(ctx context.Context) []byte { return c.debugDigest(ctx, args) }}
		case debugKeyed[sub] && len(args) > 2:
			return c.routeByKeys(ctx, name, flagsOf(ci), args, args[2:])
		case debugKeyed[sub] || debugOneServer[sub]:
			return plan{anyMaster: true}
		}
		return plan{special: func(ctx context.Context) []byte { return c.everyMaster(ctx, args) }}
	case "eval", "eval_ro":
		if c.opt.Standalone == "" && len(args) > 2 && len(commandKeys(name, ci, args)) == 0 && string(args[2]) == "0" {
			return plan{special: func(ctx context.Context) []byte { return c.keylessEval(ctx, args) }}
		}
	case "script", "function", "config", "flushall", "flushdb", "save", "bgsave", "bgrewriteaof":
		if len(args) < 2 && (name == "script" || name == "function" || name == "config") {
			return plan{reply: errorReply("ERR wrong number of arguments for '" + name + "' command")}
		}
		if isBroadcast(name, args) {
			return plan{special: func(ctx context.Context) []byte { return c.wholeServer(ctx, args) }}
		}
	}
	if ci != nil && len(ci.Flags) == 0 && len(args) > 1 {
		// A container (XGROUP, XINFO, OBJECT, MEMORY, ...): its subcommand's entry says where
		// the keys are, so that it goes to their master, not to any master and then MOVED.
		if sci := table.info[name+"|"+strings.ToLower(string(args[1]))]; sci != nil {
			ci = sci
		}
	}
	return c.routeByKeys(ctx, name, flagsOf(ci), args, commandKeys(name, ci, args))
}

// servedSpecially are the commands that plan serves itself rather than route by key.
var servedSpecially = map[string]bool{"dbsize": true, "scan": true, "keys": true, "randomkey": true, "slowlog": true, "latency": true, "script": true, "function": true, "config": true, "flushall": true, "flushdb": true, "save": true, "bgsave": true, "bgrewriteaof": true, "debug": true, "publish": true, "pubsub": true}

// debugKeyed are the DEBUG subcommands that read the keys after them: they go to the keys'
// master. debugOneServer are those that compute a reply and change nothing (a protocol's
// reply types, a pattern's cost): they go to one master; DIGEST, in front of a cluster, goes
// to every master and their digests are combined (digest.go). Every other DEBUG subcommand changes how a server behaves (SET-ACTIVE-EXPIRE,
// SET-DISABLE-DENY-SCRIPTS, SLEEP, RELOAD, ...) and goes to every master, as one server would
// apply it to all its data.
var (
	debugKeyed     = map[string]bool{"object": true, "sdslen": true, "digest-value": true, "listpack": true, "quicklist": true, "ziplist": true}
	debugOneServer = map[string]bool{"protocol": true, "stringmatch-len": true, "digest": true, "help": true, "log": true, "leak": true, "mallctl": true, "mallctl-str": true}
)

// routeByKeys sends a command to the master of its keys' slot; blocking ones on a
// connection of their own, multi-key ones over several slots split or refused.
func (c *Cluster) routeByKeys(ctx context.Context, name string, cf commandFlags, args, keys [][]byte) plan {
	if cf.blocking {
		return plan{special: func(ctx context.Context) []byte { return c.blocking(ctx, args, keys) }, ownDeadline: true}
	}
	if len(keys) == 0 {
		return plan{anyMaster: true}
	}
	if c.opt.Standalone != "" {
		return plan{addr: c.opt.Standalone}
	}
	slot := Slot(keys[0])
	same := true
	for _, k := range keys[1:] {
		if Slot(k) != slot {
			same = false
			break
		}
	}
	if !same {
		if splittable[name] {
			return plan{special: func(ctx context.Context) []byte { return c.split(ctx, name, args) }}
		}
		return plan{reply: errorReply("CROSSSLOT Keys in request don't hash to the same slot")}
	}
	addr, err := c.slotMaster(ctx, slot, keys[0])
	if err != nil {
		return plan{reply: unavailable(err)}
	}
	return plan{addr: addr, slot: slot}
}

func hasFlag(ci *redis.CommandInfo, flag string) bool {
	for _, f := range ci.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// commandKeys returns the keys of a command: from Redis's key positions, or, for commands
// whose keys move, from their arguments.
func commandKeys(name string, ci *redis.CommandInfo, args [][]byte) [][]byte {
	numkeysAt := func(pos int) [][]byte {
		if pos >= len(args) {
			return nil
		}
		n, err := strconv.Atoi(string(args[pos]))
		if err != nil || n < 0 || pos+1+n > len(args) {
			return nil
		}
		return args[pos+1 : pos+1+n]
	}
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return numkeysAt(2)
	case "zunion", "zinter", "zdiff", "zintercard", "sintercard", "lmpop", "zmpop":
		return numkeysAt(1)
	case "blmpop", "bzmpop":
		return numkeysAt(2)
	case "zunionstore", "zinterstore", "zdiffstore":
		if len(args) < 2 {
			return nil
		}
		return append([][]byte{args[1]}, numkeysAt(2)...)
	case "xread", "xreadgroup":
		for i, a := range args {
			if strings.EqualFold(string(a), "streams") {
				rest := args[i+1:]
				return rest[:len(rest)/2]
			}
		}
		return nil
	}
	return positionalKeys(ci, args)
}

// positionalKeys are the keys at the positions COMMAND INFO gives.
func positionalKeys(ci *redis.CommandInfo, args [][]byte) [][]byte {
	if ci == nil || ci.FirstKeyPos <= 0 {
		return nil
	}
	first, last, step := int(ci.FirstKeyPos), int(ci.LastKeyPos), int(ci.StepCount)
	if last < 0 {
		last = len(args) + last
	}
	if step <= 0 {
		step = 1
	}
	if step == 1 { // the keys are a run of the arguments: no copy (capped, so never appended to)
		lo := min(first, len(args))
		hi := max(min(last+1, len(args)), lo)
		return args[lo:hi:hi]
	}
	var keys [][]byte
	for i := first; i <= last && i < len(args); i += step {
		keys = append(keys, args[i])
	}
	return keys
}

func (c *Cluster) anyMaster(ctx context.Context) (string, error) {
	ms, err := c.masters(ctx)
	if err != nil {
		return "", err
	}
	if len(ms) == 0 {
		return "", errNoMasters
	}
	return ms[time.Now().UnixNano()%int64(len(ms))], nil
}

var errNoMasters = errors.New("no master is known")
