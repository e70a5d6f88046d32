package router

import (
	"context"
	"strconv"
	"strings"
)

// CLIENT REPLY OFF|SKIP|ON, served per client: a muted session's replies are dropped here,
// and CLIENT UNBLOCK, served by Redis on the connection the client's command waits on.

// muted: CLIENT REPLY OFF or SKIP holds for the session's next command.
func (s *Session) muted() bool { return s.replyOff || s.skipNext }

// serveMuted serves one command of a session whose replies are off (CLIENT REPLY OFF), or
// skipped for this command (after CLIENT REPLY SKIP): what is gathered before it is
// sent, and its own reply dropped, but for CLIENT REPLY ON's and RESET's, which turn them on
// again.
func (r *Router) serveMuted(b *batch, args [][]byte, cl Class) {
	if isReplyOn(args) || isReset(args) { // which clear a SKIP too, and answer
		r.serveOne(b, args, cl)
		return
	}
	b.flush()
	w := b.w
	b.w = discard{}
	r.serveOne(b, args, cl)
	b.flush()
	b.w = w
}

// isReplyOn: args is CLIENT REPLY ON.
func isReplyOn(args [][]byte) bool {
	return len(args) == 3 && strings.EqualFold(string(args[0]), "client") &&
		strings.EqualFold(string(args[1]), "reply") && strings.EqualFold(string(args[2]), "on")
}

// isReset: args is RESET, which answers +RESET whatever the reply mode, and turns replies on.
func isReset(args [][]byte) bool {
	return len(args) == 1 && strings.EqualFold(string(args[0]), "reset")
}

// discard is a Writer that writes nothing: a muted command's reply.
type discard struct{}

func (discard) WriteString(string)     {}
func (discard) WriteBulkString(string) {}
func (discard) WriteInt64(int64)       {}
func (discard) WriteError(string)      {}
func (discard) WriteArray(int)         {}
func (discard) WriteNull()             {}
func (discard) WriteRaw([]byte)        {}

// clientUnblock serves CLIENT UNBLOCK <id> [TIMEOUT|ERROR] as Redis does, for a client of this
// proxy: Redis itself unblocks the connection its blocking command waits on (upstream's
// Unblock), and answers that command; :0 for a client that is not blocked, or is unknown.
// Like CLIENT KILL, it is an admin's (@admin in Redis).
func (r *Router) clientUnblock(ctx context.Context, s *Session, args [][]byte) (Reply, error) {
	if len(args) != 3 && len(args) != 4 {
		return nil, respError("ERR wrong number of arguments for 'client|unblock' command")
	}
	if !s.Admin {
		return nil, respError("NOPERM User " + s.User + " has no permissions to run the 'client|unblock' command")
	}
	id, err := strconv.ParseInt(string(args[2]), 10, 64)
	if err != nil {
		return nil, respError("ERR value is not an integer or out of range")
	}
	mode := "TIMEOUT"
	if len(args) == 4 {
		mode = strings.ToUpper(string(args[3]))
		if mode != "TIMEOUT" && mode != "ERROR" {
			return nil, respError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
		}
	}
	v, ok := r.sessions.Load(id)
	if !ok || r.opt.Upstream == nil {
		return Int(0), nil
	}
	return rawReply(r.opt.Upstream.Unblock(ctx, &v.(*Session).blocked, mode)), nil
}
