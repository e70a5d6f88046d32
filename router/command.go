package router

import (
	"context"
	"path"
	"slices"
	"strings"

	"seckill-proxy/internal/resp"
)

// cmdCommand answers COMMAND and its subcommands from Redis's own table, with the proxy's
// own commands (SECKILL.*) added: COMMAND, COMMAND INFO, COUNT, LIST and DOCS merge the two;
// GETKEYS, GETKEYSANDFLAGS and HELP are Redis's. Without an upstream, the proxy's table alone.
func (r *Router) cmdCommand(ctx context.Context, s *Session, args [][]byte) (Reply, error) {
	if r.opt.Upstream == nil {
		return r.ownCommand(args)
	}
	sub := ""
	if len(args) > 1 {
		sub = strings.ToLower(string(args[1]))
	}
	raw := r.opt.Upstream.For(s.Proto).Do(ctx, [][][]byte{args})[0]
	if raw[0] == '-' {
		return rawReply(raw), nil
	}
	own := r.ownCommands()
	switch sub {
	case "count":
		n, err := resp.ParseInt(raw)
		if err != nil {
			return rawReply(raw), nil
		}
		return Int(n + int64(len(own))), nil
	case "", "info", "list", "docs":
	default:
		return rawReply(raw), nil
	}
	els, err := resp.SplitArray(raw)
	if err != nil {
		return rawReply(raw), nil
	}
	out := make(Array, 0, len(els)+len(own))
	for _, e := range els {
		out = append(out, rawReply(e))
	}
	return r.addOwnCommands(out, own, sub, args), nil
}

// addOwnCommands adds the proxy's own commands to Redis's reply out to COMMAND [sub ...].
func (r *Router) addOwnCommands(out Array, own []*command, sub string, args [][]byte) Array {
	switch {
	case sub == "" || (sub == "info" && len(args) == 2):
		for _, c := range own {
			out = append(out, c.info())
		}
	case sub == "info":
		for i, name := range args[2:] {
			if c := r.lookup(name); c != nil && isOwn(c) && i < len(out) {
				out[i] = c.info()
			}
		}
	case sub == "list":
		pattern := "*"
		if len(args) == 5 && strings.EqualFold(string(args[2]), "filterby") {
			if !strings.EqualFold(string(args[3]), "pattern") {
				break // by ACL category or module: none of the proxy's own
			}
			pattern = string(args[4])
		}
		for _, c := range own {
			if ok, _ := path.Match(pattern, c.name); ok {
				out = append(out, BulkString(c.name))
			}
		}
	case sub == "docs":
		for _, c := range own {
			if len(args) > 2 && !named(c.name, args[2:]) {
				continue
			}
			out = append(out, BulkString(c.name), Fields("summary", "seckill-proxy's own command: see its README", "since", "1.0.0", "group", "seckill"))
		}
	}
	return out
}

// ownCommand answers COMMAND from the proxy's own table, when there is no Redis behind it.
func (r *Router) ownCommand(args [][]byte) (Reply, error) {
	if len(args) == 1 {
		out := make(Array, 0, len(r.table))
		for _, c := range r.table {
			out = append(out, c.info())
		}
		return out, nil
	}
	switch strings.ToLower(string(args[1])) {
	case "count":
		return Int(len(r.table)), nil
	case "docs":
		return Array{}, nil
	case "info":
		out := make(Array, 0, len(args)-2)
		for _, name := range args[2:] {
			if c := r.lookup(name); c != nil {
				out = append(out, c.info())
			} else {
				out = append(out, NullBulk{})
			}
		}
		return out, nil
	}
	return nil, respError("ERR unknown subcommand '" + string(args[1]) + "'. Try COMMAND HELP.")
}

// ownCommands are the commands Redis does not have: the SECKILL ones.
func (r *Router) ownCommands() []*command {
	var out []*command
	for _, c := range r.table {
		if isOwn(c) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *command) int { return strings.Compare(a.name, b.name) })
	return out
}

func isOwn(c *command) bool { return strings.HasPrefix(c.name, "seckill.") }

func named(name string, names [][]byte) bool {
	for _, n := range names {
		if strings.EqualFold(string(n), name) {
			return true
		}
	}
	return false
}

// info is the command's COMMAND INFO entry as Redis 7 gives it: name, arity, flags, first
// key, last key, step, ACL categories, tips, key specifications, subcommands.
func (c *command) info() Reply {
	flags := Array{}
	first, last := 0, 0
	if isOwn(c) {
		flags = append(flags, SimpleString("write"))
		first, last = 1, 1
	}
	return Array(Fields(c.name, c.arity, flags, first, last, first, Array{}, Array{}, Array{}, Array{}))
}

// CopyArgs copies a command whose arguments point into a buffer that will be reused.
func CopyArgs(args [][]byte) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = append([]byte(nil), a...)
	}
	return out
}
