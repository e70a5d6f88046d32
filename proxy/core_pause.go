package proxy

import "time"

// CLIENT PAUSE on the event loop: a client whose next command the pause holds keeps it unread
// and is served again when the pause ends: at its time (nextDeadline wakes the loop then) or
// at CLIENT UNPAUSE (posted to every loop). Its commands after that one wait behind it, in
// order, as in Redis.

// paused says whether CLIENT PAUSE holds args now (never in the buy shell, which has no
// clients).
func (k *core) paused(args [][]byte) bool {
	if k.cl == nil {
		return false
	}
	_, held := k.cl.paused(args, k.now)
	return held
}

// hold holds c, whose next command is args, if the pause holds args: true when it does.
func (k *core) hold(c *client, args [][]byte) bool {
	if k.cl == nil {
		return false
	}
	until, held := k.cl.paused(args, k.now)
	if !held {
		return false
	}
	c.paused = true
	k.held = append(k.held, c)
	if k.heldUntil.IsZero() || until.After(k.heldUntil) {
		k.heldUntil = until
	}
	return true
}

// releaseHeld serves the held clients again once the pause is over (now, or at once: force,
// after CLIENT UNPAUSE); a command the pause still holds (a new pause) is held again.
func (k *core) releaseHeld(force bool) {
	if len(k.held) == 0 || (!force && k.now.Before(k.heldUntil)) {
		return
	}
	for _, c := range k.held {
		c.paused = false
		if !c.closed {
			k.markDirty(c)
		}
	}
	clear(k.held)
	k.held, k.heldUntil = k.held[:0], time.Time{}
}
