package proxy

import (
	"time"

	"seckill-proxy/guard"
	"seckill-proxy/router"
)

// coreEnv is what a core asks of the world around it.
type coreEnv interface {
	nodeEnv
	clientEnv
}

// nodeEnv is what every shell gives the core for its connections to the nodes and its buys:
// the buy shell, which has no clients, gives only this.
type nodeEnv interface {
	// begin and end hold the server's drain while commands are in flight (see Server).
	begin() bool
	end()
	// dial connects to up's node; the answer comes as upConnected or upFailed.
	dial(up *node)
	// post runs f on the core's goroutine, later (from a goroutine of elsewhere).
	post(f func())
}

// clientEnv is what an event loop gives the core for its clients' sake.
type clientEnv interface {
	// classify decides what the core does with args, a command of sess's, once
	// (router.Classify): its kind, and where a direct one goes.
	classify(sess *router.Session, args [][]byte) router.Class
	// peek is classify for a command gathered behind another into one batch (router.Peek).
	peek(sess *router.Session, args [][]byte) router.Class
	// immediate appends to out the reply to args, a router.KindImmediate command, which the
	// core writes at once instead of serving it.
	immediate(out []byte, args [][]byte) []byte
	counted(n int)
	// parseBuy reads args, a router.KindBuy command of sess's (classified as cl), and counts
	// it (router.ParseBuy): reply is set when it fails before the guard.
	parseBuy(sess *router.Session, cl router.Class, args [][]byte) (req guard.BuyRequest, reply []byte)
	// serveSlow runs cmds, identified as ids, through the router for c, elsewhere; the answer
	// comes as slowDone.
	serveSlow(c *client, cmds [][][]byte, ids []router.Class)
	// startBlocking sends args, a router.KindBlocking command of c's, to Redis now, and waits
	// for its reply elsewhere; the answer comes as slowDone. false: it could not go at once,
	// and serveSlow must serve it.
	startBlocking(c *client, cl router.Class, args [][]byte) bool
	// followRedirects follows MOVED and ASK replies, in turn; each answer comes as redirected,
	// and the end as redirectsDone.
	followRedirects(jobs []redirectJob)
	// paused says whether CLIENT PAUSE holds args now, and until when at most.
	paused(args [][]byte, now time.Time) (until time.Time, held bool)
	// monitored feeds a command the core serves itself (a buy, a direct command, an
	// immediate answer) to the MONITOR clients; the router feeds those it serves.
	monitored(sess *router.Session, args [][]byte)
}
