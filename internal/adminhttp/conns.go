package adminhttp

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// connTable is the admin port's open connections, each with what it is doing. It is safe for
// concurrent use.
type connTable struct {
	max     int // connections for any path
	reserve int // more, for the probes only, when the max are all busy
	mu      sync.Mutex
	conns   map[net.Conn]*connEntry
	held    int // reserved connections open
}

// connEntry is one open connection: serving while a handler runs for it (an open path's:
// open), else waiting since since (for its first request, its headers, or its next request).
// A reserved connection serves only the probes.
type connEntry struct {
	conn     net.Conn
	raw      *spokeConn
	since    time.Time
	serving  bool
	open     bool
	reserved bool
}

// spokeConn is an accepted connection that notes whether its peer has sent anything yet (a
// TLS hello, a request line): of those that wait, one that has said nothing is closed first.
type spokeConn struct {
	net.Conn
	spoke atomic.Bool
}

func (c *spokeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.spoke.Store(true)
	}
	return n, err
}

// connKey is the context key of a request's *connEntry.
type connKey struct{}

// evictingListener accepts every connection, making room for it first (connTable.admit);
// with tc, it serves TLS over it.
type evictingListener struct {
	net.Listener
	t  *connTable
	tc *tls.Config
}

func (l *evictingListener) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sc := &spokeConn{Conn: raw}
		c := net.Conn(sc)
		if l.tc != nil {
			c = tls.Server(sc, l.tc)
		}
		if l.t.admitSpoke(c, sc, time.Now()) {
			return c, nil
		}
		_ = c.Close()
	}
}

// admit records c when the table is full by closing first the connection that has waited
// longest without being served (of those, one whose peer has said nothing yet first), else the one that has been serving an open path (metrics, a
// probe: each takes milliseconds) for longest, past SlowServe (its reader does not read).
// Past that, c is admitted as a reserved connection that serves only the probes, up to
// reserve of them (the reserved one that has waited longest is closed for it when they are
// all taken); false: every connection is busy, and c is refused.
func (t *connTable) admit(c net.Conn, now time.Time) bool { return t.admitSpoke(c, nil, now) }

// admitSpoke is admit for a connection whose first bytes raw notes (nil: taken as spoken).
func (t *connTable) admitSpoke(c net.Conn, raw *spokeConn, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	reserved := false
	if len(t.conns)-t.held >= t.max {
		victim := t.victim(now, false)
		if victim == nil && t.held >= t.reserve {
			victim = t.victim(now, true)
		}
		if victim == nil && t.held >= t.reserve {
			return false
		}
		reserved = victim == nil || victim.reserved
		if victim != nil {
			_ = victim.conn.Close() // its server goroutine ends, and reports StateClosed
			t.drop(victim)
		}
	}
	if reserved {
		t.held++
	}
	t.conns[c] = &connEntry{conn: c, raw: raw, since: now, reserved: reserved}
	return true
}

// silent: e's peer has sent nothing yet, as far as its reads tell.
func (e *connEntry) silent() bool { return e.raw != nil && !e.raw.spoke.Load() }

// quiet: e's peer has sent nothing, its socket holding nothing unread either (asked of the
// kernel: the server goroutine of a connection that has spoken may not have read yet).
func (e *connEntry) quiet() bool {
	if !e.silent() {
		return false
	}
	if sc, ok := e.raw.Conn.(syscall.Conn); ok && pending(sc) {
		e.raw.spoke.Store(true)
		return false
	}
	return true
}

// victim is the connection to close to make room (among the reserved ones, or the others), or
// nil.
func (t *connTable) victim(now time.Time, reserved bool) *connEntry {
	for {
		v := t.oldestWaiting(now, reserved)
		if v == nil || !v.silent() || v.quiet() {
			return v
		}
		// It had spoken after all: quiet marked it so, and the next look passes it over.
	}
}

// oldestWaiting is victim's pick, by what the connections' reads tell.
func (t *connTable) oldestWaiting(now time.Time, reserved bool) *connEntry {
	var idle, slow *connEntry
	for _, e := range t.conns {
		switch {
		case e.reserved != reserved:
		case !e.serving && (idle == nil || e.silent() && !idle.silent() ||
			e.silent() == idle.silent() && e.since.Before(idle.since)):
			idle = e
		case e.serving && e.open && now.Sub(e.since) > SlowServe && (slow == nil || e.since.Before(slow.since)):
			slow = e
		}
	}
	if idle != nil {
		return idle
	}
	return slow
}

// drop forgets e (under t.mu).
func (t *connTable) drop(e *connEntry) {
	if t.conns[e.conn] == e {
		delete(t.conns, e.conn)
		if e.reserved {
			t.held--
		}
	}
}

// state follows the server's view of a connection (http.Server.ConnState).
func (t *connTable) state(c net.Conn, s http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.conns[c]
	if e == nil {
		return
	}
	switch s {
	case http.StateClosed, http.StateHijacked:
		t.drop(e)
	case http.StateIdle:
		e.since = time.Now()
	}
}

// serving marks a connection's handler as running (for an open path: open), or done.
func (t *connTable) serving(e *connEntry, on, open bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e.serving, e.open, e.since = on, on && open, time.Now()
}

// peers counts the open paths' requests in flight per peer address, so that one peer's
// scrapes cannot take the port's connections or the process's time. Safe for concurrent use.
type peers struct {
	mu       sync.Mutex
	inFlight map[string]int
}

// take counts one more request of peer, false if it has MaxPeerInFlight already.
func (p *peers) take(peer string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight[peer] >= MaxPeerInFlight {
		return false
	}
	p.inFlight[peer]++
	return true
}

// done counts one request of peer's as ended.
func (p *peers) done(peer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight[peer]--; p.inFlight[peer] <= 0 {
		delete(p.inFlight, peer)
	}
}
