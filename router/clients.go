package router

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// clientView is what other connections' goroutines see of a connection: CLIENT LIST, CLIENT
// INFO and CLIENT KILL read it. Its owner writes the fields under mu; the rest are atomic or
// set once before the connection is served.
type clientView struct {
	mu                    sync.Mutex
	name, libName, libVer string
	user, lastCmd         string
	laddr                 string
	proto                 int
	fd                    int
	kill                  func()
	created               time.Time
	lastActive            atomic.Int64 // Unix nanoseconds
	subscriber            atomic.Bool
	killed                atomic.Bool
	haveConn              bool
	// multi is the number of commands queued in the connection's open MULTI, or -1 (CLIENT
	// LIST's multi=, and flags=x), as of its last command.
	multi atomic.Int64
}

// Active records that the connection sent a command at now (the event loop calls it for the
// commands it serves itself).
func (s *Session) Active(now time.Time) { s.view.lastActive.Store(now.UnixNano()) }

// SetConn tells the session its local address, its descriptor (-1 if none), and how to close
// its connection from another goroutine (CLIENT KILL). Call it before the connection is served.
func (s *Session) SetConn(laddr string, fd int, kill func()) {
	s.view.mu.Lock()
	s.view.laddr, s.view.fd, s.view.kill, s.view.haveConn = laddr, fd, kill, true
	s.view.mu.Unlock()
}

// SetSubscriber marks the connection as a subscriber (flags=P), or not.
func (s *Session) SetSubscriber(on bool) { s.view.subscriber.Store(on) }

// MaxClientName bounds a connection's name and its library's name and version, each: the
// proxy keeps them for the connection's life and CLIENT LIST writes them all, so 10 clients
// naming themselves 32 MiB held 966 MiB, and an admin's CLIENT LIST then took 3 GB. Redis sets
// no bound; the clients' own names are a few dozen bytes.
const MaxClientName = 512

// clientAttr refuses a name (what names it) that Redis would refuse, or over MaxClientName.
func clientAttr(v []byte, what string) error {
	if len(v) > MaxClientName {
		return respError("ERR " + what + " is over " + strconv.Itoa(MaxClientName) + " bytes, the most seckill-proxy keeps")
	}
	for _, c := range v {
		if c < '!' || c > '~' {
			return respError("ERR " + what + " cannot contain spaces, newlines or special characters.")
		}
	}
	return nil
}

func setName(s *Session, name []byte) error {
	if err := clientAttr(name, "Client names"); err != nil {
		return err
	}
	s.Name = string(name)
	s.view.mu.Lock()
	s.view.name = s.Name
	s.view.mu.Unlock()
	return nil
}

// clientHelp is CLIENT HELP's text, for what the proxy answers.
var clientHelp = []string{
	"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GETNAME", "    Return the name of the current connection.",
	"ID", "    Return the ID of the current connection.",
	"INFO", "    Return information about the current client connection.",
	"KILL <ip:port>", "    Kill connection made from <ip:port> (admin).",
	"KILL <option> <value> [<option> <value> [...]]", "    Kill connections (admin). Options are: ID, ADDR, LADDR, USER, TYPE normal|pubsub, SKIPME yes|no, MAXAGE.",
	"LIST [TYPE normal|pubsub] [ID <id> [<id> ...]]", "    Return information about this proxy's client connections.",
	"NO-EVICT (ON|OFF)", "    The proxy never evicts clients: accepted.",
	"PAUSE <timeout> [WRITE|ALL]", "    Suspend this proxy's clients, or their writes, for <timeout> milliseconds (admin).",
	"REPLY (ON|OFF|SKIP)", "    Control the replies sent to the current connection.",
	"SETINFO <option> <value>", "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
	"SETNAME <name>", "    Assign the name <name> to the current connection.",
	"UNBLOCK <clientid> [TIMEOUT|ERROR]", "    Unblock the specified blocked client.",
	"UNPAUSE", "    Stop this proxy's pause of its clients (admin).",
	"HELP", "    Print this help.",
}

// unsupportedClient are CLIENT subcommands the proxy cannot honour, and why.
var unsupportedClient = map[string]string{
	"tracking":     "the proxy's Redis connections are shared by many clients, so invalidations cannot be routed to one",
	"caching":      "client-side caching (CLIENT TRACKING) is not carried",
	"getredir":     "client-side caching (CLIENT TRACKING) is not carried",
	"trackinginfo": "client-side caching (CLIENT TRACKING) is not carried",
	"no-touch":     "the proxy's Redis connections are shared by many clients, so one client's commands cannot be kept from touching keys",
}

func (r *Router) cmdClient(ctx context.Context, s *Session, args [][]byte) (Reply, error) {
	sub := strings.ToLower(string(args[1]))
	wrongArgs := respError("ERR wrong number of arguments for 'client|" + sub + "' command")
	if n, ok := clientArity[sub]; ok && len(args) != n {
		return nil, wrongArgs
	}
	switch sub {
	case "setname":
		if err := setName(s, args[2]); err != nil {
			return nil, err
		}
		return OK, nil
	case "getname":
		if s.Name == "" {
			return NullBulk{}, nil
		}
		return BulkString(s.Name), nil
	case "setinfo":
		return clientSetInfo(s, args[2], args[3])
	case "id":
		return Int(s.ID), nil
	case "info":
		return BulkString(r.clientLine(s, time.Now(), "client|info", args)), nil
	case "list", "kill":
		if sub == "kill" && len(args) < 3 {
			return nil, wrongArgs // Redis checks the arity first, as here
		}
		// Other clients' addresses, names and users are an admin's (@admin in Redis too).
		if !s.Admin {
			return nil, respError("NOPERM User " + s.User + " has no permissions to run the 'client|" + sub + "' command")
		}
		if sub == "list" {
			return r.clientList(s, args)
		}
		return r.clientKill(s, args[2:])
	case "unblock":
		return r.clientUnblock(ctx, s, args)
	case "no-evict":
		if v := strings.ToLower(string(args[2])); v != "on" && v != "off" {
			return nil, respError("ERR syntax error")
		}
		return OK, nil
	case "reply":
		return clientReply(s, args[2])
	case "pause":
		return r.clientPause(s, args)
	case "unpause":
		return r.clientUnpause(s, args)
	case "help":
		out := make(Array, len(clientHelp))
		for i, l := range clientHelp {
			out[i] = SimpleString(l)
		}
		return out, nil
	}
	if why, ok := unsupportedClient[sub]; ok {
		return nil, respError("ERR CLIENT " + strings.ToUpper(sub) + " is not supported through seckill-proxy: " + why)
	}
	return nil, respError("ERR unknown subcommand '" + string(args[1]) + "'. Try CLIENT HELP.")
}

// clientArity is the number of arguments (the command's name included) of CLIENT's
// subcommands that take a fixed number.
var clientArity = map[string]int{"setname": 3, "getname": 2, "setinfo": 4, "id": 2, "info": 2, "no-evict": 3, "reply": 3}

// clientSetInfo answers CLIENT SETINFO LIB-NAME|LIB-VER <value>.
func clientSetInfo(s *Session, attr, v []byte) (Reply, error) {
	if err := clientAttr(v, strings.ToLower(string(attr))); err != nil {
		return nil, err
	}
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	switch strings.ToLower(string(attr)) {
	case "lib-name":
		s.LibName = string(v)
		s.view.libName = s.LibName
	case "lib-ver":
		s.LibVer = string(v)
		s.view.libVer = s.LibVer
	default:
		return nil, respError("ERR Unrecognized option '" + string(attr) + "'")
	}
	return OK, nil
}

// clientReply answers CLIENT REPLY ON|OFF|SKIP.
func clientReply(s *Session, mode []byte) (Reply, error) {
	switch strings.ToLower(string(mode)) {
	case "on":
		s.replyOff, s.skipNext = false, false
		return OK, nil
	case "off":
		s.replyOff = true
		return noReply{}, nil
	case "skip":
		s.skipNext = !s.replyOff
		return noReply{}, nil
	}
	return nil, respError("ERR syntax error")
}

// eachClient calls f for every open connection, in the order of their IDs.
func (r *Router) eachClient(f func(*Session)) {
	var all []*Session
	r.sessions.Range(func(_, v any) bool {
		all = append(all, v.(*Session))
		return true
	})
	slices.SortFunc(all, func(a, b *Session) int { return int(a.ID - b.ID) })
	for _, s := range all {
		f(s)
	}
}

// clientLine is one connection's line of CLIENT LIST, in Redis 7's format. cmd is the last
// command the proxy served itself (a plain command the event loop forwards is not recorded).
// What the proxy knows is filled as Redis fills it: for the connection asking (self, sending
// selfArgs), its query buffer and argv hold that command (Redis 7.0 answers qbuf=26 to its own
// CLIENT LIST); multi= counts the commands queued in another connection's MULTI, which then
// has flags=x; a subscriber has flags=P. The proxy keeps no per-client buffers of Redis's
// kind otherwise: those fields are 0.
func (r *Router) clientLine(s *Session, now time.Time, self string, selfArgs [][]byte) string {
	v := &s.view
	v.mu.Lock()
	name, libName, libVer, user, cmd, laddr, fd, proto := v.name, v.libName, v.libVer, v.user, v.lastCmd, v.laddr, v.fd, v.proto
	if !v.haveConn {
		fd = -1
	}
	v.mu.Unlock()
	qbuf, argvMem := 0, 0
	if self != "" {
		cmd = self
		qbuf = commandSize(selfArgs)
		for _, a := range selfArgs {
			argvMem += len(a)
		}
	}
	if cmd == "" {
		cmd = "NULL"
	}
	multi := v.multi.Load()
	flags := ""
	if v.subscriber.Load() {
		flags += "P"
	}
	if multi >= 0 {
		flags += "x"
	}
	if flags == "" {
		flags = "N"
	}
	idle := now.Sub(time.Unix(0, v.lastActive.Load()))
	var b strings.Builder
	b.WriteString("id=" + strconv.FormatInt(s.ID, 10))
	b.WriteString(" addr=" + s.Remote + " laddr=" + laddr + " fd=" + strconv.Itoa(fd) + " name=" + name)
	b.WriteString(" age=" + strconv.FormatInt(int64(now.Sub(v.created).Seconds()), 10))
	b.WriteString(" idle=" + strconv.FormatInt(int64(max(idle, 0).Seconds()), 10))
	b.WriteString(" flags=" + flags + " db=0 sub=0 psub=0 ssub=0 multi=" + strconv.FormatInt(multi, 10))
	b.WriteString(" qbuf=" + strconv.Itoa(qbuf) + " qbuf-free=0 argv-mem=" + strconv.Itoa(argvMem) + " multi-mem=0")
	b.WriteString(" rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=" + strconv.Itoa(qbuf+argvMem) + " events=r cmd=" + cmd + " user=" + user)
	b.WriteString(" redir=-1 resp=" + strconv.Itoa(max(proto, 2)) + " lib-name=" + libName + " lib-ver=" + libVer + "\n")
	return b.String()
}

// commandSize is the size of args as a RESP request: what a server's query buffer holds of it.
func commandSize(args [][]byte) int {
	n := 1 + len(strconv.Itoa(len(args))) + 2
	for _, a := range args {
		n += 1 + len(strconv.Itoa(len(a))) + 2 + len(a) + 2
	}
	return n
}

// clientList answers CLIENT LIST [TYPE normal|pubsub|master|replica] [ID id ...].
func (r *Router) clientList(self *Session, cmd [][]byte) (Reply, error) {
	args := cmd[2:]
	kind, ids := "", map[int64]bool(nil)
	for i := 0; i < len(args); i++ {
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "type" && i+1 < len(args):
			kind = strings.ToLower(string(args[i+1]))
			if kind != "normal" && kind != "pubsub" && kind != "master" && kind != "replica" && kind != "slave" {
				return nil, respError("ERR Unknown client type '" + string(args[i+1]) + "'")
			}
			i++
		case opt == "id" && i+1 < len(args):
			ids = map[int64]bool{}
			for _, a := range args[i+1:] {
				id, err := strconv.ParseInt(string(a), 10, 64)
				if err != nil || id <= 0 {
					return nil, respError("ERR Invalid client ID")
				}
				ids[id] = true
			}
			i = len(args)
		default:
			return nil, respError("ERR syntax error")
		}
	}
	now := time.Now()
	var b strings.Builder
	r.eachClient(func(s *Session) {
		switch {
		case ids != nil && !ids[s.ID]:
		case kind == "master" || kind == "replica" || kind == "slave":
		case kind == "pubsub" && !s.view.subscriber.Load(), kind == "normal" && s.view.subscriber.Load():
		default:
			if s == self {
				b.WriteString(r.clientLine(s, now, "client|list", cmd))
			} else {
				b.WriteString(r.clientLine(s, now, "", nil))
			}
		}
	})
	return BulkString(b.String()), nil
}

// clientKill answers CLIENT KILL ip:port (OK, or an error when no client matches) and CLIENT
// KILL <filter> <value> ... (the number killed), as Redis does, for the proxy's own clients.
func (r *Router) clientKill(self *Session, args [][]byte) (Reply, error) {
	if len(args) == 1 {
		found := false
		r.eachClient(func(s *Session) {
			if !found && s.Remote == string(args[0]) && r.kill(s) {
				found = true
			}
		})
		if !found {
			return nil, respError("ERR No such client")
		}
		return OK, nil
	}
	if len(args) == 0 || len(args)%2 != 0 {
		return nil, respError("ERR syntax error")
	}
	f := killFilter{skipMe: true}
	for i := 0; i < len(args); i += 2 {
		if err := f.set(strings.ToLower(string(args[i])), string(args[i+1])); err != nil {
			return nil, err
		}
	}
	if f.user != "" && !r.creds.Load().has(f.user) {
		return nil, respError("ERR No such user '" + f.user + "'")
	}
	now := time.Now()
	killed := 0
	r.eachClient(func(s *Session) {
		if f.matches(self, s, now) && r.kill(s) {
			killed++
		}
	})
	return Int(killed), nil
}

// killFilter is CLIENT KILL's filters.
type killFilter struct {
	id                      int64
	addr, laddr, user, kind string
	maxAge                  int64
	skipMe                  bool
}

// set sets filter name (lower case) to v.
func (f *killFilter) set(name, v string) error {
	switch name {
	case "id":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return respError("ERR client-id should be greater than 0")
		}
		f.id = n
	case "addr":
		f.addr = v
	case "laddr":
		f.laddr = v
	case "user":
		f.user = v
	case "type":
		f.kind = strings.ToLower(v)
		if f.kind != "normal" && f.kind != "pubsub" && f.kind != "master" && f.kind != "replica" && f.kind != "slave" {
			return respError("ERR Unknown client type '" + v + "'")
		}
	case "skipme":
		switch strings.ToLower(v) {
		case "yes":
			f.skipMe = true
		case "no":
			f.skipMe = false
		default:
			return respError("ERR syntax error")
		}
	case "maxage":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return respError("ERR value is not an integer or out of range")
		}
		f.maxAge = n
	default:
		return respError("ERR syntax error")
	}
	return nil
}

// matches: s is to be killed by a CLIENT KILL that self sent at now.
func (f *killFilter) matches(self, s *Session, now time.Time) bool {
	s.view.mu.Lock()
	sl, su := s.view.laddr, s.view.user
	s.view.mu.Unlock()
	sub := s.view.subscriber.Load()
	switch {
	case f.skipMe && s == self,
		f.id != 0 && s.ID != f.id,
		f.addr != "" && s.Remote != f.addr,
		f.laddr != "" && sl != f.laddr,
		f.user != "" && su != f.user,
		f.kind == "master" || f.kind == "replica" || f.kind == "slave",
		f.kind == "pubsub" && !sub, f.kind == "normal" && sub,
		f.maxAge > 0 && int64(now.Sub(s.view.created).Seconds()) < f.maxAge:
		return false
	}
	return true
}

// kill closes s's connection once; false if it cannot be or was already.
func (r *Router) kill(s *Session) bool {
	s.view.mu.Lock()
	kill := s.view.kill
	s.view.mu.Unlock()
	if kill == nil || !s.view.killed.CompareAndSwap(false, true) {
		return false
	}
	kill()
	return true
}
