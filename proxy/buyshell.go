package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/guard"
)

// The buys that the router reads on goroutines (every buy of the goroutine-per-client server,
// and in loop mode a subscriber's, or one of a session a reload revoked) run on a core of
// their own, the same core and engine as an event loop's (engine.go), in a shell with no
// clients and no epoll, so that it builds everywhere. Whoever brings the core work (a
// router's goroutine with a batch of buys, the goroutine that reads a master's connection, a
// dial, Kafka's acknowledgement, the timer) posts it; one that finds the core idle runs a
// turn itself, with whatever the others posted meanwhile (flat combining), and hands what
// comes during that turn to a helper goroutine, which runs turns until none is left. So a lone
// buy costs no hand-off to another goroutine before it is written, no client's goroutine is
// kept from its client by the others' work, and under load the buys of many goroutines go out
// together, as one script call per master and SKU, as a loop's do. The turn's runner writes to
// the masters itself, bounded by upstream's timeout; one goroutine per connection reads.

// ownTurns is how many turns a goroutine with work of its own runs before it hands the rest
// to the helper: its own work goes out in the first.
const ownTurns = 4

// buyShellCallsOut bounds the script calls out to one master at once (coreLimits.maxCallsOut).
const buyShellCallsOut = 1

// buyShell runs a core for the router's buys. Build it with newBuyShell.
type buyShell struct {
	s    *Server
	core *core

	mu      sync.Mutex // guards posted, running and shut
	posted  []func()
	running bool // a goroutine runs turns
	// handOff gives the runner's part to the helper goroutine (help), which then runs turns.
	handOff chan struct{}
	shut    bool
	stopped chan struct{} // closed when shut

	timer    *time.Timer // posts a turn at the core's next deadline
	conns    map[*node]*upConn
	stopping bool
}

// upConn is the shell's side of one connection to a node.
type upConn struct {
	nc   net.Conn
	gone bool // closed: what its reader posts is ignored
}

func newBuyShell(s *Server, g *guard.Guard) *buyShell {
	b := &buyShell{s: s, stopped: make(chan struct{}), handOff: make(chan struct{}), conns: map[*node]*upConn{}}
	b.core = newBuyCore(buyShellEnv{b}, coreLimits{
		maxPipeline: s.limits.MaxPipeline, maxArgBytes: s.limits.MaxArgBytes, maxOut: loopMaxOut,
		timeout: s.upstream.Timeout(), redialGap: loopRedialGap, maxCallsOut: buyShellCallsOut, ownerLanes: s.upstream.OwnerLanes(),
	}, s.upstream.Standalone() == "")
	newGuardEngine(b.core, g)
	b.core.metrics = s.metrics
	b.timer = time.AfterFunc(time.Hour, func() { b.post(func() {}) })
	b.timer.Stop()
	go b.help()
	return b
}

// RunBuys serves the router's buys (router.BuyEngine): each reply as AppendBuyReply makes
// it, in the order of reqs. A ctx that ends first (the client went) leaves the buys to finish
// in the core, which tees what they sell; the replies are then errors nobody reads.
func (b *buyShell) RunBuys(ctx context.Context, reqs []guard.BuyRequest) [][]byte {
	replies := make([][]byte, len(reqs))
	if len(reqs) == 0 {
		return replies
	}
	left := len(reqs)
	all := make(chan struct{})
	if !b.post(func() {
		b.core.eng.run(reqs, func(i int, reply []byte) {
			replies[i] = reply
			if left--; left == 0 {
				close(all)
			}
		})
	}) {
		return errorReplies(len(reqs), errShuttingDown)
	}
	select {
	case <-all:
		return replies
	case <-ctx.Done():
		return errorReplies(len(reqs), ctx.Err())
	}
}

func errorReplies(n int, err error) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = upstreamUnavailable(err)
	}
	return out
}

// post has f run by the core's runner, which is this goroutine if the core is idle; false: the
// shell has stopped, and f will not run.
func (b *buyShell) post(f func()) bool {
	b.mu.Lock()
	if b.shut {
		b.mu.Unlock()
		return false
	}
	b.posted = append(b.posted, f)
	if b.running { // the runner takes f with the rest
		b.mu.Unlock()
		return true
	}
	b.running = true
	b.mu.Unlock()
	b.runTurns(false)
	return true
}

// runTurns runs turns while there is work: what was posted, and buys sent back for another
// round. A goroutine that came with work of its own (helper false: a router's goroutine, a
// master's reader) runs up to ownTurns turns (the first writes what it brought), and hands
// what is left to the helper goroutine, so that under load no client's goroutine is kept from
// its client for more than a few turns.
func (b *buyShell) runTurns(helper bool) {
	for turns := 0; ; turns++ {
		b.mu.Lock()
		fs := b.posted
		b.posted = nil
		if len(fs) == 0 && (b.shut || !b.core.pendingWork()) {
			b.running = false
			b.mu.Unlock()
			return
		}
		if !helper && turns >= ownTurns && !b.shut {
			b.posted = fs // the helper takes them, and is the runner now
			b.mu.Unlock()
			b.handOff <- struct{}{}
			return
		}
		b.mu.Unlock()
		b.turn(fs)
	}
}

// help runs the turns that a goroutine with work of its own handed over, until the shell stops.
func (b *buyShell) help() {
	for {
		select {
		case <-b.handOff:
			b.runTurns(true)
		case <-b.stopped:
			return
		}
	}
}

// turn is one turn of the core: the work posted, the deadlines, then the buys gathered, written.
func (b *buyShell) turn(fs []func()) {
	b.core.now = time.Now()
	for _, f := range fs {
		f()
	}
	if b.stopping && !b.shut {
		b.closeAll()
	}
	if b.shut { // what was posted before the stop still ran: it is told the proxy drains
		return
	}
	for _, up := range b.core.expire() {
		b.s.log.Warn("Redis answered nothing in time; reconnecting", zap.String("addr", up.addr), zap.Duration("timeout", b.core.lim.timeout))
		b.closeUp(up)
	}
	b.core.flushInputs()
	for up, uc := range b.conns {
		b.write(up, uc)
	}
	if next := b.core.nextDeadline(); !next.IsZero() {
		b.timer.Reset(max(time.Until(next), time.Millisecond))
	}
}

// write sends what the core holds for up's node. A master that takes nothing for upstream's
// timeout is taken for gone.
func (b *buyShell) write(up *node, uc *upConn) {
	if len(up.out) == 0 {
		return
	}
	_ = uc.nc.SetWriteDeadline(b.core.now.Add(b.core.lim.timeout))
	n, err := uc.nc.Write(up.out)
	up.out = consume(up.out, n)
	if err != nil {
		b.failed(up, uc, err)
	}
}

// dialed takes a new connection to up's node, or the error that there is none.
func (b *buyShell) dialed(up *node, nc net.Conn, err error) {
	if err == nil && b.stopping {
		_ = nc.Close()
		return
	}
	if err != nil {
		b.s.log.Warn("cannot connect to Redis", zap.String("addr", up.addr), zap.Error(err))
		b.core.dialFailed(up, err)
		return
	}
	uc := &upConn{nc: nc}
	b.conns[up] = uc
	up.fd = 0 // the shell has a connection (a socket of its own, not a descriptor)
	go b.readFrom(up, uc)
	b.core.upConnected(up)
}

// readFrom reads up's node until its connection ends, and gives the core what came.
func (b *buyShell) readFrom(up *node, uc *upConn) {
	buf := make([]byte, loopReadSize)
	taken := make(chan struct{}, 1)
	for {
		n, err := uc.nc.Read(buf)
		if n > 0 {
			data := buf[:n]
			if !b.post(func() {
				defer func() { taken <- struct{}{} }()
				if uc.gone {
					return
				}
				up.in = append(up.in, data...)
				b.core.upRead(up)
				if !up.connected {
					b.closeUp(up)
				}
			}) {
				return
			}
			select { // buf is read into again only once the core has copied it
			case <-taken:
			case <-b.stopped:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				b.post(func() { b.failed(up, uc, err) })
			}
			return
		}
	}
}

// failed: uc's connection to up's node broke.
func (b *buyShell) failed(up *node, uc *upConn, err error) {
	if uc.gone {
		return
	}
	b.core.upFailed(up, fmt.Errorf("redis %s: %w", up.addr, err), unavailLost)
	b.closeUp(up)
}

// closeUp closes the connection to up's node; its goroutines end.
func (b *buyShell) closeUp(up *node) {
	uc := b.conns[up]
	if uc == nil {
		return
	}
	delete(b.conns, up)
	uc.gone = true
	up.fd = -1
	_ = uc.nc.Close()
}

// stop ends the shell once the buys it runs are answered or the server's drain gave up on
// them; it closes its connections.
func (b *buyShell) stop() {
	if b.post(func() { b.stopping = true }) {
		<-b.stopped
	}
}

func (b *buyShell) closeAll() {
	b.mu.Lock()
	b.shut = true
	b.mu.Unlock()
	b.timer.Stop()
	for up := range b.conns {
		b.closeUp(up)
	}
	close(b.stopped)
}

// buyShellEnv is the world as the buy shell's core sees it: nodes to dial, work posted back.
// It has no clients, so it gives no clientEnv.
type buyShellEnv struct{ b *buyShell }

func (e buyShellEnv) begin() bool   { return e.b.s.begin() }
func (e buyShellEnv) end()          { e.b.s.end() }
func (e buyShellEnv) post(f func()) { e.b.postAside(f) }

// postAside has f run by the core's runner, never by this goroutine: the core's env posts from
// goroutines that must not wait on Redis (Kafka's acknowledgements, with buy.reply_after kafka
// or buy.no_replica kafka, which a turn's blocking writes to a master would hold).
func (b *buyShell) postAside(f func()) {
	b.mu.Lock()
	if b.shut {
		b.mu.Unlock()
		return
	}
	b.posted = append(b.posted, f)
	if b.running {
		b.mu.Unlock()
		return
	}
	b.running = true
	b.mu.Unlock()
	select {
	case b.handOff <- struct{}{}:
	case <-b.stopped:
	}
}

// dial connects to up's node as the proxy's own user, on a goroutine; calls queue meanwhile.
func (e buyShellEnv) dial(up *node) {
	b := e.b
	go func() {
		ctx, cancel := context.WithTimeout(b.s.ctx, b.s.upstream.DialTimeout()+b.s.upstream.Timeout())
		defer cancel()
		nc, err := b.s.upstream.DialOwner(ctx, up.addr)
		if !b.post(func() { b.dialed(up, nc, err) }) && err == nil {
			_ = nc.Close()
		}
	}()
}
