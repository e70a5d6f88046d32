package upstream

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/internal/resp"
)

// Description is what Redis's command table says of a client's command, for the router's
// policy.
type Description struct {
	// ReadOnly: Redis flags the command (or its subcommand) readonly.
	ReadOnly bool
	// Keys are the keys it names, at the positions the table gives.
	Keys [][]byte
	// AnyArg: the table cannot say where its keys are (Redis does not know the command or the
	// subcommand, the table is not loaded yet, or its keys move), so any argument may be one.
	AnyArg bool
	// Blocking: Redis's table flags the command blocking: it may wait for other clients'
	// writes (BLPOP, XREAD, ...: XREAD without BLOCK too, as the table has it).
	Blocking bool
	// plain is the table's entry of a command routed plainly by its positional keys (Keys),
	// ci nil for any other: DirectOf routes it from here, without a second look-up.
	plain commandFlags
}

// ReadOnly reports whether Redis's command table flags args as a read, loading the table
// first if it has not been (an error, or a command Redis does not know: false).
func (c *Cluster) ReadOnly(ctx context.Context, args [][]byte) bool {
	if _, err := c.commands(func() context.Context { return ctx }); err != nil {
		return false
	}
	return c.Describe(args).ReadOnly
}

// Describe tells the router's policy what Redis's command table says of args.
func (c *Cluster) Describe(args [][]byte) Description {
	t := c.info.Load()
	if t == nil || len(args) == 0 {
		return Description{AnyArg: true}
	}
	var buf [64]byte
	name := resp.AppendLower(buf[:0], args[0])
	if cf, ok := t.plain[string(name)]; ok { // the common case: no allocation
		return Description{ReadOnly: cf.readOnly, Blocking: cf.blocking, Keys: positionalKeys(cf.ci, args), plain: cf}
	}
	ci := t.info[string(name)]
	if ci != nil && len(ci.Flags) == 0 && len(args) > 1 { // a container: its subcommand says
		name = resp.AppendLower(append(name, '|'), args[1])
		ci = t.info[string(name)]
	}
	if ci == nil {
		return Description{AnyArg: true}
	}
	cf := flagsOf(ci)
	switch {
	case cf.readOnly:
		return Description{ReadOnly: true, Blocking: cf.blocking}
	case hasFlag(ci, "movablekeys"):
		return Description{AnyArg: true, Blocking: cf.blocking}
	}
	return Description{Keys: positionalKeys(ci, args), Blocking: cf.blocking}
}

// Restricted reports whether pass-through connections log in as a restricted Redis ACL user.
func (c *Cluster) Restricted() bool { return c.opt.Restricted }

// parseCommands reads Redis's COMMAND reply into a table by lower-case name, subcommands
// included as "container|sub".
func parseCommands(reply []any) map[string]*redis.CommandInfo {
	out := make(map[string]*redis.CommandInfo, len(reply)*2)
	var add func(entries []any)
	add = func(entries []any) {
		for _, e := range entries {
			f, ok := e.([]any)
			if !ok || len(f) < 6 {
				continue
			}
			name, _ := f[0].(string)
			ci := &redis.CommandInfo{Name: strings.ToLower(name)}
			n, _ := f[1].(int64)
			ci.Arity = int8(n)
			if flags, ok := f[2].([]any); ok {
				for _, fl := range flags {
					if s, ok := fl.(string); ok {
						ci.Flags = append(ci.Flags, s)
						ci.ReadOnly = ci.ReadOnly || s == "readonly"
					}
				}
			}
			first, _ := f[3].(int64)
			last, _ := f[4].(int64)
			step, _ := f[5].(int64)
			ci.FirstKeyPos, ci.LastKeyPos, ci.StepCount = int8(first), int8(last), int8(step)
			out[ci.Name] = ci
			if len(f) > 9 {
				if subs, ok := f[9].([]any); ok {
					add(subs)
				}
			}
		}
	}
	add(reply)
	return out
}

// MayWrite says whether args may write, as Redis's CLIENT PAUSE WRITE judges it: its entry (or
// its subcommand's) is flagged write or may_replicate (EVAL, PUBLISH, WAIT...). A command the
// table does not know, or before the table is loaded, may.
func (c *Cluster) MayWrite(args [][]byte) bool {
	t := c.info.Load()
	if t == nil || len(args) == 0 || len(args[0]) > 64 {
		return true
	}
	var buf [64]byte
	name := resp.AppendLower(buf[:0], args[0])
	ci := t.info[string(name)]
	if ci != nil && len(ci.Flags) == 0 && len(args) > 1 && len(args[1]) <= 64 {
		ci = t.info[string(resp.AppendLower(append(name, '|'), args[1]))]
	}
	return ci == nil || hasFlag(ci, "write") || hasFlag(ci, "may_replicate")
}
