package guard

import (
	"strconv"
	"sync"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/internal/resp"
)

// A WAIT after the buy scripts (buy.wait_replicas) narrows the window in which a failover
// loses a decrement, but it holds the master's connection until the replicas acknowledge or
// buy.wait_timeout passes, and every call behind it waits too. A master with no replica that
// acknowledges (the replica just promoted after a failover, whose own replica is the dead
// node) answers every WAIT 0 after the full timeout: the calls queue up behind the WAITs
// faster than they drain, and every buy times out although the master is up. So a WAIT that no
// replica acknowledged turns WAIT off for that master for waitProbe; the next call after it
// waits again, as a probe. A WAIT that some replicas acknowledged keeps WAIT on.

// waitProbe is how long a master whose WAIT no replica acknowledged goes without WAIT.
const waitProbe = time.Second

// replicaWaits holds, per master address, until when its WAIT is skipped. Safe for
// concurrent use; the zero value is ready.
type replicaWaits struct {
	mu   sync.Mutex
	skip map[string]time.Time
}

// on reports whether a WAIT should follow the calls to the master at addr at now.
func (w *replicaWaits) on(addr string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	until, ok := w.skip[addr]
	return !ok || !now.Before(until)
}

// acked takes how many replicas acknowledged a WAIT on addr at now (-1: the WAIT failed).
func (w *replicaWaits) acked(addr string, n int64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n > 0 {
		delete(w.skip, addr)
		return
	}
	if w.skip == nil {
		w.skip = map[string]time.Time{}
	}
	w.skip[addr] = now.Add(waitProbe)
}

// WaitCommand is the WAIT that follows the script calls to the master at addr with
// buy.wait_replicas, or nil: none configured, or none for now because that master's last
// WAIT was acknowledged by no replica. WaitReply takes its reply.
func (g *Guard) WaitCommand(addr string) []byte {
	n := g.opt.Buy.WaitReplicas
	if n <= 0 || !g.replicaWaits.on(addr, g.opt.Now()) {
		return nil
	}
	b := redcon.AppendArray(nil, 3)
	b = redcon.AppendBulkString(b, "WAIT")
	b = redcon.AppendBulkString(b, strconv.Itoa(n))
	return redcon.AppendBulkString(b, strconv.FormatInt(g.opt.Buy.WaitTimeout.Milliseconds(), 10))
}

// WaitReply takes the reply of a WAIT on addr: it counts a WAIT that came back with fewer
// replicas than asked for, and turns WAIT off for a while on a master no replica answered.
func (g *Guard) WaitReply(addr string, raw []byte) {
	v, err := resp.Decode(raw)
	n, ok := v.(int64)
	if err != nil || !ok {
		n = -1
	}
	g.waitAcked(addr, n)
}

// waitAcked counts a WAIT on addr that n replicas acknowledged (-1: it failed).
func (g *Guard) waitAcked(addr string, n int64) {
	if n < int64(g.opt.Buy.WaitReplicas) {
		g.stats.waitShort.Add(1)
	}
	if n == 0 {
		g.stats.waitOff.Add(1)
	}
	g.replicaWaits.acked(addr, n, g.opt.Now())
}
