package proxy

import (
	"fmt"
	"io"
	"os"
	"time"

	"seckill-proxy/upstream"
)

// Deadlines of the commands in flight upstream: a buy call waited for a little longer on a node
// that keeps answering, and what is past its deadline answered UNAVAILABLE.

// buyHold bounds, in call timeouts, how long a written buy call is waited for on a connection
// that keeps answering.
const buyHold = 10

// holdCall: a buy call past its deadline is waited for another call timeout, when its node has
// answered something within the last half of one and the call is younger than buyHold of
// them. Its script is in Redis's hands; on a busy machine a slow reply is no fault, and a
// buyer told UNAVAILABLE for an order they got would have been told something that is not
// known (I9). A node silent for half a call timeout (stopped, cut off, gone), or a call held
// buyHold timeouts, answers its buys UNAVAILABLE: so a buy sent just before its master
// stopped is answered at its deadline, not a timeout later (a node that answered a moment
// before the stop had answered within the whole last timeout).
func (k *core) holdCall(up *node, in *inflight) bool {
	timeout := k.eng.callTimeout()
	if k.now.Sub(up.lastRead) >= timeout/2 || k.now.Sub(in.sent) >= buyHold*timeout {
		return false
	}
	in.deadline = k.now.Add(timeout)
	return true
}

// expire answers every command in flight whose deadline has passed, with a timeout, and
// keeps it in the queue, where its reply is dropped when it comes: one slow command (a long
// EVAL) costs its own caller, not every command behind it on the connection, which are
// answered when Redis gets to them. A node that has answered nothing for two timeouts while
// commands wait is taken for gone: the connection is dropped (the shell closes it), and the
// commands still waiting fail.
func (k *core) expire() (dropped []*node) {
	for _, up := range k.ups {
		// The deadlines differ (a buy's is buy.call_timeout): every command is looked at.
		for i := up.head; i < len(up.queue); i++ {
			in := &up.queue[i]
			if in.answered || k.now.Before(in.deadline) {
				continue
			}
			if (in.call != nil || in.wait != nil) && k.holdCall(up, in) {
				continue
			}
			in.answered = true
			switch {
			case in.call != nil:
				k.eng.expireCall(in.call)
			case in.wait != nil:
				k.eng.expireWait(in.wait)
			case in.c != nil:
				if k.metrics != nil {
					k.metrics.pass.unavailable.WithLabelValues(unavailTimeout).Inc()
				}
				k.complete(in.c, in.seq, upstream.Unavailable(fmt.Errorf("redis %s: %w", up.addr, os.ErrDeadlineExceeded)), true)
			}
		}
		if up.head < len(up.queue) && up.connected && k.now.Sub(up.lastRead) >= 2*k.lim.timeout {
			k.upFailed(up, fmt.Errorf("redis %s: no answer for %v: %w", up.addr, 2*k.lim.timeout, io.ErrNoProgress), unavailNoAnswer)
			dropped = append(dropped, up)
		}
	}
	return dropped
}

// nextDeadline is when expire has something to do: the earliest deadline of a command not
// yet answered, or of a node's silence; zero when nothing waits.
func (k *core) nextDeadline() time.Time {
	next := k.heldUntil // the end of a CLIENT PAUSE that holds clients (zero: none)
	for _, up := range k.ups {
		for i := up.head; i < len(up.queue); i++ {
			if d := up.queue[i].deadline; !up.queue[i].answered && (next.IsZero() || d.Before(next)) {
				next = d
			}
		}
		if up.head < len(up.queue) && up.connected {
			if d := up.lastRead.Add(2 * k.lim.timeout); next.IsZero() || d.Before(next) {
				next = d
			}
		}
	}
	return next
}
