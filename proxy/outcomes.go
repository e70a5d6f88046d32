package proxy

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/guard"
	"seckill-proxy/sale"
)

// Outcome channels: a buyer's seckill:outcome:<sku>/<uid>, which the proxy serves itself, from
// memory, to a client that would rather be told its order's outcome than ask for it. SUBSCRIBE
// answers the confirmation, then a message with the buyer's status now ("none", "pending <id>",
// or the outcome), then, if it was pending, a message with the outcome once the sink has stored
// the order (woken as SECKILL.STATUS ... WAIT is: guard.Watch, no Redis call per buyer). Over
// RESP2 these are subscriber mode's messages, over RESP3 pushes between the replies to any
// other command: one design for both protocols, which every client library already speaks.
//
// A connection holds outcome channels or Redis's channels, not both: Redis's confirmations
// count Redis's subscriptions only, and a client that reads its count going to 0 leaves
// subscriber mode. So (P|S)SUBSCRIBE is refused on a connection that holds outcome channels,
// and an outcome channel on one that holds Redis's.

// errOutcomeMixed refuses mixing outcome channels and Redis's on one connection.
const errOutcomeMixed = "ERR outcome channels (" + sale.OutcomeChannelPrefix + "<sku>/<uid>) are served by seckill-proxy on a connection of their own: subscribe to Redis's channels and patterns on another"

// isOutcomeSubscribe: args is a SUBSCRIBE whose first channel is an outcome channel.
func isOutcomeSubscribe(args [][]byte) bool {
	return len(args) > 1 && strings.EqualFold(string(args[0]), "subscribe") && sale.IsOutcomeChannel(args[1])
}

// namesOutcomeChannel: some channel of a SUBSCRIBE or SSUBSCRIBE is in the outcome channels'
// namespace (a PSUBSCRIBE's patterns are Redis's, even seckill:outcome:*: nothing is published
// there).
func namesOutcomeChannel(args [][]byte) bool {
	return slices.ContainsFunc(args[1:], sale.IsOutcomeChannel)
}

// errChannelsPerConn refuses an outcome channel past limits.outcome_channels_per_conn.
func errChannelsPerConn(n int) string {
	return "BUSY this connection holds " + strconv.Itoa(n) + " outcome channels already (limits.outcome_channels_per_conn); UNSUBSCRIBE from some, or subscribe on another connection"
}

// errChannelsShare refuses an outcome channel past limits.client_share.
func errChannelsShare(n int) string {
	return "BUSY this user, or this client address, holds " + strconv.Itoa(n) + " outcome channels already (limits.client_share of limits.outcome_channels); UNSUBSCRIBE from some, or poll SECKILL.STATUS"
}

// errChannels refuses an outcome channel past limits.outcome_channels.
func errChannels(n int) string {
	return "BUSY " + strconv.Itoa(n) + " outcome channels are held on this proxy already (limits.outcome_channels); poll SECKILL.STATUS"
}

// takeOutcomeChannel counts one more outcome channel held, within limits.outcome_channels
// (0: no bound).
func (s *Server) takeOutcomeChannel() bool {
	if n := s.outcomeChannels.Add(1); s.limits.OutcomeChannels > 0 && n > int64(s.limits.OutcomeChannels) {
		s.outcomeChannels.Add(-1)
		s.outcomeRefused.Add(1)
		return false
	}
	return true
}

// outcomeSub is one outcome channel a client holds: the wait for its outcome, if any.
type outcomeSub struct {
	w    *guard.Waiter // nil: nothing to wait for, or not yet (its first read is tried again)
	done chan struct{} // closed when the client unsubscribes or goes
	// cancel ends the context of a first read that is tried again.
	cancel context.CancelFunc
}

// heldChannel stands for every channel with nothing to wait for (no order, or its outcome
// told): such a channel costs its name in the connection's map and nothing else.
var heldChannel = &outcomeSub{}

func (o *outcomeSub) stop() {
	if o == heldChannel {
		return
	}
	close(o.done)
	o.cancel()
	if o.w != nil {
		o.w.Stop()
	}
}

// outcomeBridge runs subscriber mode for a client whose first subscription is an outcome
// channel; it returns as bridge does.
func (s *Server) outcomeBridge(c *clientConn, first [][]byte, rest [][][]byte) [][][]byte {
	b := &outcomeSession{s: s, c: c, write: lockedWrite(c), resp3: c.sess.Proto == 3, subs: map[string]*outcomeSub{},
		share: guard.ShareKeys(c.sess.User, c.sess.Remote)}
	defer b.close()
	rest = serveSubscriber(c, first, rest, b.send, b.write)
	if b.next == nil {
		return nil
	}
	return append([][][]byte{b.next}, rest...)
}

// outcomeSession is one client's subscriber mode over outcome channels: the channels it holds
// and the waits that tell their outcomes.
type outcomeSession struct {
	s     *Server
	c     *clientConn
	write func(func(*redcon.Writer)) bool // the waits and the command loop both write to c
	resp3 bool
	subs  map[string]*outcomeSub
	share [2]string // the keys its channels count under (Server.outcomeShares)
	waits sync.WaitGroup
	// next is the command that ends subscriber mode, served by the caller (nil: none).
	next [][]byte
}

func (b *outcomeSession) close() {
	for _, o := range b.subs {
		o.stop()
	}
	b.s.outcomeChannels.Add(-int64(len(b.subs)))
	b.s.outcomeShares.Release(b.share, len(b.subs))
	b.waits.Wait()
}

func (b *outcomeSession) head(w *redcon.Writer, n int) {
	if b.resp3 {
		w.WriteRaw([]byte(">" + strconv.Itoa(n) + "\r\n"))
	} else {
		w.WriteArray(n)
	}
}

// confirm writes a (un)subscription's reply: kind, the channel (nil: none), and the count.
func (b *outcomeSession) confirm(w *redcon.Writer, kind string, ch []byte) {
	b.head(w, 3)
	w.WriteBulkString(kind)
	if ch == nil {
		w.WriteNull()
	} else {
		w.WriteBulk(ch)
	}
	w.WriteInt(len(b.subs))
}

func (b *outcomeSession) message(w *redcon.Writer, ch, text string) {
	b.head(w, 3)
	w.WriteBulkString("message")
	w.WriteBulkString(ch)
	w.WriteBulkString(text)
}

func (b *outcomeSession) writeError(msg string) bool {
	return b.write(func(w *redcon.Writer) { w.WriteError(msg) })
}

// refusal is why ch cannot be subscribed ("": it can, and it is counted among the proxy's
// outcome channels); ok: ch parsed as an outcome channel.
func (b *outcomeSession) refusal(ch []byte, ok bool) string {
	lim := b.s.limits
	switch {
	case !sale.IsOutcomeChannel(ch):
		return errOutcomeMixed
	case !ok:
		return "ERR an outcome channel is " + sale.OutcomeChannelPrefix + "<sku>/<uid>, each 1-64 characters of [A-Za-z0-9_.:-]"
	case lim.OutcomeChannelsPerConn > 0 && len(b.subs) >= lim.OutcomeChannelsPerConn:
		b.s.outcomeRefused.Add(1)
		return errChannelsPerConn(lim.OutcomeChannelsPerConn)
	case !b.s.outcomeShares.Take(b.share):
		b.s.outcomeRefused.Add(1)
		return errChannelsShare(b.s.outcomeShares.Most())
	case !b.s.takeOutcomeChannel():
		b.s.outcomeShares.Release(b.share, 1)
		return errChannels(lim.OutcomeChannels)
	}
	return ""
}

func (b *outcomeSession) subscribe(ch []byte) {
	if b.subs[string(ch)] != nil { // held already (so well formed): as Redis answers a channel subscribed twice
		b.write(func(w *redcon.Writer) { b.confirm(w, "subscribe", ch) })
		return
	}
	sku, uid, ok := sale.ParseOutcomeChannel(ch)
	if msg := b.refusal(ch, ok); msg != "" {
		b.writeError(msg)
		return
	}
	ctx, cancel := context.WithCancel(b.c.ctx)
	wt, st, err := b.s.router.WatchOutcome(ctx, sku, uid, false)
	later := err != nil && errors.Is(err, guard.ErrUnavailable)
	if err != nil && !later {
		cancel()
		b.s.outcomeChannels.Add(-1)
		b.s.outcomeShares.Release(b.share, 1)
		b.writeError(err.Error())
		return
	}
	key := string(ch)
	o := heldChannel
	if wt != nil || later {
		o = &outcomeSub{w: wt, done: make(chan struct{}), cancel: cancel}
	} else {
		cancel()
	}
	b.subs[key] = o
	b.write(func(w *redcon.Writer) {
		b.confirm(w, "subscribe", ch)
		if !later {
			b.message(w, key, st.String())
		}
	})
	if o == heldChannel {
		return
	}
	b.waits.Go(func() { b.follow(ctx, o, key, sku, uid, later) })
}

// follow tells channel key's outcome once the sink has stored it. later: Redis failed the
// first read (a master failing over): the subscription stands, and the status follows once a
// read succeeds.
func (b *outcomeSession) follow(ctx context.Context, o *outcomeSub, key, sku, uid string, later bool) {
	wt := o.w
	if later {
		var now guard.Status
		var err error
		for {
			if wt, now, err = b.s.router.WatchOutcome(ctx, sku, uid, true); err == nil {
				break
			}
			// Unsubscribed, or the proxy closes; else status.max_waiters is reached
			// meanwhile: the channel waits for room, as it waited for Redis.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		b.write(func(w *redcon.Writer) { b.message(w, key, now.String()) })
		if wt == nil {
			return
		}
		defer wt.Stop() // o.w stays nil: stop does not see this waiter
	}
	select {
	case out := <-wt.C:
		wt.Stop() // no longer waiting: the channel is held until UNSUBSCRIBE
		b.write(func(w *redcon.Writer) { b.message(w, key, out.String()) })
	case <-o.done:
	case <-b.c.ctx.Done():
	}
}

func (b *outcomeSession) unsubscribe(chans [][]byte) {
	if len(chans) == 0 {
		for _, k := range slices.Sorted(maps.Keys(b.subs)) {
			chans = append(chans, []byte(k))
		}
		if len(chans) == 0 {
			b.write(func(w *redcon.Writer) { b.confirm(w, "unsubscribe", nil) })
		}
	}
	for _, ch := range chans {
		b.leave(string(ch))
		b.write(func(w *redcon.Writer) { b.confirm(w, "unsubscribe", ch) })
	}
}

// leave gives up the outcome channel ch, if held.
func (b *outcomeSession) leave(ch string) {
	if o := b.subs[ch]; o != nil {
		o.stop()
		delete(b.subs, ch)
		b.s.outcomeChannels.Add(-1)
		b.s.outcomeShares.Release(b.share, 1)
	}
}

// send serves one command; false ends subscriber mode (see next) or the connection.
func (b *outcomeSession) send(args [][]byte) bool {
	name := strings.ToLower(string(args[0]))
	subscribes := name == "subscribe" || name == "psubscribe" || name == "ssubscribe"
	switch {
	case name == "quit":
		b.write(func(w *redcon.Writer) { w.WriteString("OK") })
		return false
	case name == "reset" && len(args) == 1:
		for ch := range b.subs { // as Redis's RESET does, with no confirmations
			b.leave(ch)
		}
		b.next = args
		return false
	case subscribes && len(b.subs) == 0 && !isOutcomeSubscribe(args):
		b.next = args // Redis's channels, with no outcome channel held: the bridge to Redis serves them
		return false
	case name == "subscribe":
		for _, ch := range args[1:] {
			b.subscribe(ch)
		}
		return true
	case name == "unsubscribe":
		b.unsubscribe(args[1:])
		return true
	case name == "psubscribe" || name == "ssubscribe":
		return b.writeError(errOutcomeMixed)
	case name == "punsubscribe" || name == "sunsubscribe":
		return b.write(func(w *redcon.Writer) { b.confirm(w, name, nil) })
	case name == "ping" && !b.resp3 && len(b.subs) > 0:
		return b.write(func(w *redcon.Writer) { writePong(w, args) })
	case b.resp3 && name == "hello" && len(args) > 1 && string(args[1]) != "3" && len(b.subs) > 0:
		return b.writeError("ERR HELLO " + string(args[1]) + " is refused while outcome channels are held: their messages come as RESP3 pushes; UNSUBSCRIBE first")
	case b.resp3:
		return b.s.serveBetween(b.c, args, b.write)
	case len(b.subs) == 0:
		b.next = args // no subscription left: an ordinary connection again, as in Redis
		return false
	}
	return b.writeError(notInSubscriberMode(name))
}

// writePong is subscriber mode's reply to PING over RESP2: ["pong", message or ""].
func writePong(w *redcon.Writer, args [][]byte) {
	w.WriteArray(2)
	w.WriteBulkString("pong")
	if len(args) > 1 {
		w.WriteBulk(args[1])
	} else {
		w.WriteBulkString("")
	}
}

// BoundFields are INFO's fields of what clients hold through this server: outcome channels,
// and the connections of their own (blocking commands, transactions, subscribers).
func (s *Server) BoundFields() []guard.Field {
	var held int
	var refused int64
	if s.upstream != nil {
		held, refused = s.upstream.OwnConns()
	}
	return []guard.Field{
		{Name: "outcome_channels", Value: s.outcomeChannels.Load(), Metric: &guard.Metric{Name: "seckill_proxy_outcome_channels", Help: "Outcome channels (seckill:outcome:<sku>/<uid>) held by this proxy's clients now.", Gauge: true}},
		{Name: "outcome_channels_refused", Value: s.outcomeRefused.Load(), Metric: &guard.Metric{Name: "seckill_proxy_outcome_channels_refused_total", Help: "Outcome channels refused BUSY past limits.outcome_channels_per_conn or limits.outcome_channels."}},
		{Name: "reply_buffers", Value: s.replies.held.Load(), Metric: &guard.Metric{Name: "seckill_proxy_reply_buffers_bytes", Help: "Bytes of replies the event loops' clients have not read yet (limits.reply_buffers bounds them).", Gauge: true}},
		{Name: "reply_buffers_disconnects", Value: s.replies.closed.Load(), Metric: &guard.Metric{Name: "seckill_proxy_reply_buffers_disconnects_total", Help: "Clients disconnected because they did not read their replies while the proxy held more than limits.reply_buffers of them."}},
		{Name: "own_conns", Value: int64(held), Metric: &guard.Metric{Name: "seckill_proxy_own_conns", Help: "Redis connections held now by blocking commands, transactions and subscribers, each its own.", Gauge: true}},
		{Name: "own_conns_refused", Value: refused, Metric: &guard.Metric{Name: "seckill_proxy_own_conns_refused_total", Help: "Blocking commands, transactions and subscriptions refused BUSY past redis.max_own_conns or redis.own_conns_share of a master's maxclients."}},
	}
}
