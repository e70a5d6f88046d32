package router

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MONITOR of the commands that pass through this proxy: each command one of its clients runs
// (pass-through, the proxy's own, buys) is fed, as Redis feeds its monitors, to every client of
// this proxy in MONITOR mode, as `+<s>.<us> [0 <client address>] "arg" ...`, arguments quoted
// as Redis quotes them and AUTH's (and HELLO's AUTH) password shown as "(redacted)". Other
// proxies' clients, and Redis's own work (its replication, expiries), are not seen: each proxy
// shows its own. A monitor that does not read its feed fast enough (monitorBacklog lines
// behind) is disconnected, as Redis disconnects one past its output buffer's limit.

// monitorBacklog is how many lines a monitor may be behind.
const monitorBacklog = 8192

// monitors are the MONITOR clients; n, read on every command, is their count.
type monitors struct {
	n    atomic.Int32
	mu   sync.Mutex
	subs map[*monitorFeed]struct{}
}

// monitorFeed is one monitor's feed: its lines, and whether it fell behind.
type monitorFeed struct {
	lines  chan []byte
	behind atomic.Bool
}

// Monitor starts a feed of the commands this proxy's clients run: its lines (RESP status
// replies, ready to write), whether it fell behind (then it is fed no more), and stop.
func (r *Router) Monitor() (lines <-chan []byte, behind func() bool, stop func()) {
	f := &monitorFeed{lines: make(chan []byte, monitorBacklog)}
	r.mon.mu.Lock()
	if r.mon.subs == nil {
		r.mon.subs = map[*monitorFeed]struct{}{}
	}
	r.mon.subs[f] = struct{}{}
	r.mon.n.Add(1)
	r.mon.mu.Unlock()
	var once sync.Once
	return f.lines, f.behind.Load, func() {
		once.Do(func() {
			r.mon.mu.Lock()
			delete(r.mon.subs, f)
			r.mon.n.Add(-1)
			r.mon.mu.Unlock()
		})
	}
}

// Monitored feeds args, a command s runs now, to the monitors (nothing to do, but one atomic
// load, while there are none).
func (r *Router) Monitored(s *Session, args [][]byte) {
	if r.mon.n.Load() == 0 || len(args) == 0 {
		return
	}
	line := monitorLine(time.Now(), s.Remote, args)
	r.mon.mu.Lock()
	defer r.mon.mu.Unlock()
	for f := range r.mon.subs {
		if f.behind.Load() {
			continue
		}
		select {
		case f.lines <- line:
		default:
			f.behind.Store(true)
		}
	}
}

// monitorLine is Redis's monitor line for args, sent by the client at addr at now.
func monitorLine(now time.Time, addr string, args [][]byte) []byte {
	us := now.UnixMicro()
	b := make([]byte, 0, 64+len(addr)+16*len(args))
	b = append(b, '+')
	b = strconv.AppendInt(b, us/1e6, 10)
	b = append(b, '.')
	frac := strconv.AppendInt(nil, us%1e6, 10)
	for range 6 - len(frac) {
		b = append(b, '0')
	}
	b = append(b, frac...)
	b = append(b, " [0 "...)
	b = append(b, addr...)
	b = append(b, ']')
	redact := redactedFrom(args)
	for i, a := range args {
		b = append(b, ' ')
		if i >= redact && redact > 0 {
			b = append(b, `"(redacted)"`...)
			continue
		}
		b = appendRepr(b, a)
	}
	return append(b, '\r', '\n')
}

// redactedFrom is the index of args' first secret argument (0: none): AUTH's arguments, and
// HELLO's from its AUTH on.
func redactedFrom(args [][]byte) int {
	switch strings.ToLower(string(args[0])) {
	case "auth":
		return 1
	case "hello":
		for i := 2; i < len(args); i++ {
			if strings.EqualFold(string(args[i]), "auth") {
				return i + 1
			}
		}
	}
	return 0
}

// appendRepr appends a quoted as Redis's sdscatrepr does: in double quotes, with \\, \", \n,
// \r, \t, \a and \b escaped, and other unprintable bytes as \xHH.
func appendRepr(b, a []byte) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for _, c := range a {
		switch c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\a':
			b = append(b, '\\', 'a')
		case '\b':
			b = append(b, '\\', 'b')
		default:
			if c < 0x20 || c > 0x7e {
				b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				b = append(b, c)
			}
		}
	}
	return append(b, '"')
}

// cmdMonitor starts MONITOR mode (an admin's): the server hands the connection its feed
// (Session.Subscribe, as for subscriber mode, holds the command).
func (r *Router) cmdMonitor(_ context.Context, s *Session, args [][]byte) (Reply, error) {
	if !s.Admin {
		return nil, respError("NOPERM User " + s.User + " has no permissions to run the 'monitor' command")
	}
	if s.inTx() {
		return nil, respError("ERR Command not allowed inside a transaction")
	}
	s.Subscribe = CopyArgs(args)
	return noReply{}, nil
}

// IsMonitor: args is MONITOR.
func IsMonitor(args [][]byte) bool {
	return len(args) == 1 && strings.EqualFold(string(args[0]), "monitor")
}
