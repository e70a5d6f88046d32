package upstream

import (
	"context"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"seckill-proxy/internal/resp"
)

// How long a blocking command waits. Redis reads each command's timeout at one place: the last
// argument of BLPOP, BRPOP, BRPOPLPUSH, BLMOVE, BZPOPMIN and BZPOPMAX (seconds, a float), the
// first of BLMPOP and BZMPOP (seconds), BLOCK's of XREAD and XREADGROUP (milliseconds), the
// second of WAIT and the third of WAITAOF (milliseconds). A timeout of 0 waits until data comes,
// for ever: the proxy then sets its connection to Redis no deadline at all, and notices a node
// that died by TCP keepalive (foreverKeepAlive) and one that lost its slots or its cluster by
// Redis's own answer (MOVED, CLUSTERDOWN, UNBLOCKED), which it passes on or follows.

// blockTimeout reads args' own timeout, where Redis reads it: forever for 0; ok false when
// args is not a blocking command, or its timeout cannot be read (Redis answers it at once, an
// error or, for XREAD without BLOCK, what is there).
func blockTimeout(args [][]byte) (d time.Duration, forever, ok bool) {
	if len(args) == 0 || len(args[0]) > 16 {
		return 0, false, false
	}
	var buf [16]byte
	var arg []byte
	perSecond := true
	switch name := string(resp.AppendLower(buf[:0], args[0])); name {
	case "blpop", "brpop", "brpoplpush", "blmove", "bzpopmin", "bzpopmax":
		if len(args) < 3 {
			return 0, false, false
		}
		arg = args[len(args)-1]
	case "blmpop", "bzmpop":
		if len(args) < 2 {
			return 0, false, false
		}
		arg = args[1]
	case "xread", "xreadgroup":
		arg, perSecond = blockOption(args), false
	case "wait":
		if len(args) != 3 {
			return 0, false, false
		}
		arg, perSecond = args[2], false
	case "waitaof":
		if len(args) != 4 {
			return 0, false, false
		}
		arg, perSecond = args[3], false
	}
	if arg == nil {
		return 0, false, false
	}
	if !perSecond {
		ms, err := strconv.ParseInt(string(arg), 10, 64)
		if err != nil || ms < 0 {
			return 0, false, false
		}
		if ms == 0 {
			return 0, true, true
		}
		return time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond, false, true
	}
	s, err := strconv.ParseFloat(string(arg), 64)
	switch {
	case err != nil || s < 0 || math.IsNaN(s) || math.IsInf(s, 0):
		return 0, false, false
	case s == 0:
		return 0, true, true
	case s > float64(math.MaxInt64/int64(time.Second)):
		return time.Duration(math.MaxInt64), false, true
	}
	return time.Duration(s * float64(time.Second)), false, true
}

// blockOption is the value of XREAD's or XREADGROUP's BLOCK option (nil: none), among the
// options before STREAMS (GROUP's group and consumer, COUNT's count, NOACK).
func blockOption(args [][]byte) []byte {
	for i := 1; i < len(args); i++ {
		switch a := string(args[i]); {
		case strings.EqualFold(a, "streams"):
			return nil
		case strings.EqualFold(a, "group"):
			i += 2
		case strings.EqualFold(a, "count"):
			i++
		case strings.EqualFold(a, "block") && i+1 < len(args):
			return args[i+1]
		}
	}
	return nil
}

// foreverKey marks a context whose command may wait for ever (deadlineOf).
type foreverKey struct{}

// blockContext is the context args, a blocking command, runs in: ctx bounded by its own
// timeout with the command timeout and a second to spare; for a timeout of 0, ctx with no
// bound but its own end (the client went), as Redis waits until data comes.
func (c *Cluster) blockContext(ctx context.Context, args [][]byte) (context.Context, context.CancelFunc) {
	d, forever, ok := blockTimeout(args)
	if forever {
		ctx, cancel := context.WithCancel(ctx)
		return context.WithValue(ctx, foreverKey{}, true), cancel
	}
	if !ok {
		d = 0
	}
	wait := c.opt.Timeout + time.Second
	if d < time.Duration(math.MaxInt64)-wait {
		wait += d
	} else {
		wait = time.Duration(math.MaxInt64)
	}
	return context.WithTimeout(ctx, wait)
}

// deadlineOf is when a command sent on ctx must have been answered: ctx's deadline; none (the
// zero time) for a blocking command that waits for ever (blockContext); else a minute.
func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	if ctx.Value(foreverKey{}) != nil {
		return time.Time{}
	}
	return time.Now().Add(time.Minute)
}

// foreverKeepAlive is how a connection with no deadline, blocked for ever, notices a node that
// is gone without a word (its host down, cut off): a probe after 10 s of silence, then every
// 5 s, and the connection fails after 3 unanswered, within about 25 s.
var foreverKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3}

// setDeadline sets nc's deadline; a zero one (none) also sets foreverKeepAlive.
func setDeadline(nc net.Conn, deadline time.Time) {
	if deadline.IsZero() {
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetKeepAliveConfig(foreverKeepAlive)
		}
	}
	_ = nc.SetDeadline(deadline)
}
