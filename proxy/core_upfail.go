package proxy

import (
	"seckill-proxy/internal/resp"
	"seckill-proxy/upstream"
)

// A node's connection lost, or not made: what was in flight on it is answered, and the
// buys' slot map looked at again.

// upFailed drops the connection to up's node and answers every command in flight there with
// err. The shell closes the socket (connected is false then).
func (k *core) upFailed(up *node, err error, reason string) {
	k.ownerDown(up)
	up.connected, up.dialing = false, false
	up.in, up.out, up.scan = up.in[:0], up.out[:0], resp.ReplyScanner{}
	reply := upstream.Unavailable(err)
	for up.head < len(up.queue) {
		in := up.queue[up.head]
		up.queue[up.head] = inflight{}
		up.head++
		switch {
		case in.call != nil:
			k.eng.failCall(in.call, err)
		case in.wait != nil:
			k.eng.waitFailed(in.wait)
		case !in.discard:
			if k.metrics != nil && !in.answered {
				k.metrics.pass.unavailable.WithLabelValues(reason).Inc()
			}
			if in.charge > 0 { // nothing to learn of the reply size from a lost connection
				if k.asked.release(in.ask, in.charge, in.askUnknown, 0) {
					k.wakeAsked()
				}
				in.charge = 0
			}
			k.done(in, reply, false)
		}
	}
	up.settle()
}

// dialFailed: the connection to up's node could not be made; commands are failed at once for
// a moment before the next try.
func (k *core) dialFailed(up *node, err error) {
	up.lastErr, up.retryAt = err, k.now.Add(k.lim.redialGap)
	k.upFailed(up, err, unavailConnect)
}

// ownerDown: the proxy lost, or cannot open, its connection to a master it buys on; the slot
// map may be out of date (a failover), and is reloaded now rather than at its next period.
func (k *core) ownerDown(up *node) {
	if up.owner && k.eng != nil {
		k.eng.nodeDown(up.addr)
	}
}
