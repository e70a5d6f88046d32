package router

import (
	"context"
	"strconv"
	"strings"

	"seckill-proxy/conf"
	"seckill-proxy/sale"
)

// The connection commands the proxy answers itself: HELLO, PING, ECHO, QUIT, SELECT.

func (r *Router) cmdHello(ctx context.Context, s *Session, args [][]byte) (Reply, error) {
	i, proto := 1, s.Proto
	if len(args) > 1 {
		v, ok := sale.ParseCount(args[1])
		if !ok {
			return nil, respError("NOPROTO unsupported protocol version")
		}
		if v != 2 && v != 3 {
			return nil, respError("NOPROTO sorry, this protocol version is not supported.")
		}
		proto, i = int(v), 2
	}
	for ; i < len(args); i++ {
		switch strings.ToUpper(string(args[i])) {
		case "AUTH":
			if i+2 >= len(args) {
				return nil, respError("ERR Syntax error in HELLO option 'auth'")
			}
			if _, err := r.cmdAuth(ctx, s, [][]byte{[]byte("auth"), args[i+1], args[i+2]}); err != nil {
				return nil, err
			}
			i += 2
		case "SETNAME":
			if i+1 >= len(args) {
				return nil, respError("ERR Syntax error in HELLO option 'setname'")
			}
			if err := setName(s, args[i+1]); err != nil {
				return nil, err
			}
			i++
		default:
			return nil, respError("ERR Syntax error in HELLO option '" + string(args[i]) + "'")
		}
	}
	if !s.Authed {
		return nil, respError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	}
	if proto != s.Proto {
		if s.tx != nil { // a WATCH stays, on a connection that now speaks proto too
			s.tx.SwitchProto(ctx, r.opt.Upstream.For(proto), proto)
		}
		s.Proto = proto
		s.view.mu.Lock()
		s.view.proto = proto
		s.view.mu.Unlock()
	}
	id := r.identity(ctx)
	return Fields("server", "redis", "version", id.version, "proto", s.Proto, "id", s.ID,
		"mode", id.mode, "role", "master", "modules", Array{}), nil
}

func cmdPing(_ context.Context, _ *Session, args [][]byte) (Reply, error) {
	if len(args) == 2 {
		return BulkString(args[1]), nil
	}
	return SimpleString("PONG"), nil
}

func cmdEcho(_ context.Context, _ *Session, args [][]byte) (Reply, error) {
	return BulkString(args[1]), nil
}

func cmdQuit(_ context.Context, s *Session, _ [][]byte) (Reply, error) {
	s.Quit = true
	return OK, nil
}

func cmdSelect(_ context.Context, _ *Session, args [][]byte) (Reply, error) {
	if string(args[1]) == "0" {
		return OK, nil
	}
	if _, ok := sale.ParseCount(args[1]); ok {
		return nil, respError("ERR DB index is out of range")
	}
	return nil, respError("ERR value is not an integer or out of range")
}

// noReply is written by the proxy itself (subscriber mode).
type noReply struct{}

func (noReply) write(Writer) {}

// cmdReset serves RESET as Redis does for a connection outside subscriber mode (a
// subscriber's leaves subscriber mode first), inside MULTI too: the transaction and every
// WATCH dropped, RESP2, no name, replies on (CLIENT REPLY), the slots written forgotten (WAIT),
// and the default user again, logged in only if it needs no password (no password and no
// users).
func (r *Router) cmdReset(ctx context.Context, s *Session, _ [][]byte) (Reply, error) {
	if s.tx != nil {
		if s.tx.Active() {
			s.tx.Discard(ctx)
		}
		s.tx.Unwatch()
		if s.Proto != 2 && r.opt.Upstream != nil {
			s.tx.SwitchProto(ctx, r.opt.Upstream.For(2), 2)
		}
	}
	creds := r.creds.Load()
	open := creds.open()
	s.Proto, s.Name, s.written, s.authFailures = 2, "", writtenSlots{}, 0
	s.replyOff, s.skipNext = false, false
	s.Authed, s.Admin, s.User, s.creds, s.login = open, open, "default", creds, conf.User{}
	if open {
		s.login = conf.User{Name: "default", Role: conf.RoleAdmin}
	}
	s.view.mu.Lock()
	s.view.name, s.view.user, s.view.proto = "", "default", 2
	s.view.mu.Unlock()
	return SimpleString("RESET"), nil
}

// cmdUnsubscribe answers an UNSUBSCRIBE, PUNSUBSCRIBE or SUNSUBSCRIBE of a connection that
// is not in subscriber mode (a subscriber's go to its subscription), as Redis does: nothing to
// leave.
func cmdUnsubscribe(_ context.Context, _ *Session, args [][]byte) (Reply, error) {
	return unsubscribed{kind: strings.ToLower(string(args[0])), channels: args[1:]}, nil
}

// unsubscribed is Redis's answer to leaving channels a connection is not subscribed to: one
// [kind, channel, 0] per channel named (a push in RESP3), or one [kind, nil, 0] when none is.
type unsubscribed struct {
	kind     string
	channels [][]byte
}

func (u unsubscribed) write(w Writer) {
	one := func(ch Reply) {
		if isRESP3(w) {
			w.WriteRaw([]byte(">3\r\n"))
		} else {
			w.WriteArray(3)
		}
		BulkString(u.kind).write(w)
		ch.write(w)
		Int(0).write(w)
	}
	if len(u.channels) == 0 {
		one(NullBulk{})
		return
	}
	for _, ch := range u.channels {
		one(BulkString(ch))
	}
}

func (r *Router) cmdSubscribe(_ context.Context, s *Session, args [][]byte) (Reply, error) {
	if s.inTx() {
		return nil, respError("ERR Command not allowed inside a transaction")
	}
	if err := r.channelBytes(args); err != nil {
		return nil, err
	}
	if !s.Admin && !strings.EqualFold(string(args[0]), "psubscribe") {
		for _, ch := range args[1:] {
			if sale.ProtectedChannel(ch) {
				return nil, respError("NOPERM " + sale.EventsChannel + " carries seckill-proxy's own messages, for its admins")
			}
		}
	}
	s.Subscribe = CopyArgs(args)
	return noReply{}, nil
}

// channelBytes refuses a (P|S)SUBSCRIBE whose names pass limits.max_channel_bytes.
func (r *Router) channelBytes(args [][]byte) error {
	if n := NamesBytes(args); r.opt.MaxChannelBytes > 0 && n > r.opt.MaxChannelBytes {
		return respError(ChannelBytesError(n, r.opt.MaxChannelBytes))
	}
	return nil
}

// NamesBytes is the bytes of a (P|S)SUBSCRIBE's channel or pattern names.
func NamesBytes(args [][]byte) int {
	n := 0
	for _, a := range args[1:] {
		n += len(a)
	}
	return n
}

// ChannelBytesError refuses channel names of n bytes past limit (limits.max_channel_bytes).
func ChannelBytesError(n, limit int) string {
	return "ERR the channel names would take this connection's subscriptions to " + strconv.Itoa(n) +
		" bytes, over limits.max_channel_bytes (" + strconv.Itoa(limit) + ")"
}
