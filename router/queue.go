package router

import (
	"context"
)

// Commands inside MULTI: what goes to Redis's transaction, and what the router answers
// itself.

// queueable: inside MULTI, the command goes to Redis's transaction (a pass-through command, or
// one of the proxy's that Redis queues: PING, ECHO, SELECT 0, INFO, COMMAND), Redis's answer
// and all; consecutive ones go in one round trip (batch.addQueued).
func queueable(c *command, err error, args [][]byte) bool {
	switch {
	case err == errPassThrough:
		return true
	case err != nil || c.flags&flagQueued == 0:
		return false
	}
	// A SELECT of another database is refused here, as it is outside MULTI.
	return c.name != "select" || string(args[1]) == "0"
}

// queue answers a command sent inside MULTI that Redis does not queue: refused, with the
// transaction, as Redis refuses it.
func (r *Router) queue(ctx context.Context, s *Session, c *command, err error, args [][]byte, w Writer) {
	switch {
	case err == nil && c.name == "select":
		s.tx.Abort()
		_, serr := cmdSelect(ctx, s, args)
		WriteError(w, serr)
	case err != nil:
		// As in Redis, a command refused while queued fails the transaction.
		s.tx.Abort()
		WriteError(w, err)
	default:
		// The proxy's own commands do not run inside a Redis transaction.
		s.tx.Abort()
		WriteError(w, respError("ERR '"+c.name+"' is not allowed inside MULTI through seckill-proxy"))
	}
}
