package adminhttp

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connTable is the admin port's open connections, each with what it is doing. It is safe for
// concurrent use.
type connTable struct {
	max   int
	mu    sync.Mutex
	conns map[net.Conn]*connEntry
}

// connEntry is one open connection: serving while a handler runs for it, else waiting since
// since (for its first request, its headers, or its next request).
type connEntry struct {
	conn    net.Conn
	since   time.Time
	serving bool
}

// connKey is the context key of a request's *connEntry.
type connKey struct{}

// evictingListener accepts every connection, making room for it first (connTable.admit).
type evictingListener struct {
	net.Listener
	t *connTable
}

func (l *evictingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.t.admit(c, time.Now()) {
			return c, nil
		}
		_ = c.Close()
	}
}

// admit records c, closing the connection that has waited longest without being served when
// the table is full; false: every connection is being served, and c is refused.
func (t *connTable) admit(c net.Conn, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.conns) >= t.max {
		var victim *connEntry
		for _, e := range t.conns {
			if !e.serving && (victim == nil || e.since.Before(victim.since)) {
				victim = e
			}
		}
		if victim == nil {
			return false
		}
		_ = victim.conn.Close() // its server goroutine ends, and reports StateClosed
		delete(t.conns, victim.conn)
	}
	t.conns[c] = &connEntry{conn: c, since: now}
	return true
}

// state follows the server's view of a connection (http.Server.ConnState).
func (t *connTable) state(c net.Conn, s http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s {
	case http.StateClosed, http.StateHijacked:
		delete(t.conns, c)
	case http.StateIdle:
		if e := t.conns[c]; e != nil {
			e.since = time.Now()
		}
	}
}

// serving marks a connection's handler as running, or done.
func (t *connTable) serving(e *connEntry, on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e.serving = on
	if !on {
		e.since = time.Now()
	}
}
