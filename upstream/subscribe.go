package upstream

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"seckill-proxy/internal/resp"
)

// Pub/sub in front of a cluster, as on one server:
//
//   - Channels and patterns live on one master, the pub/sub home (the master of slot 0, the
//     same for every proxy that sees the same cluster), and PUBLISH and PUBSUB CHANNELS,
//     NUMSUB and NUMPAT go there too: Redis Cluster carries every PUBLISH to every node, so
//     the home gets every message, and a PUBLISH answers the number of subscribers through
//     the proxies (and of those subscribed to the home directly), as one server would.
//   - Keyspace and keyevent notifications (__keyspace@0__:..., __keyevent@0__:...) are each
//     node's own: Redis does not carry them between nodes. A subscription that may match one
//     is made on every other master too, and from those only the notifications are passed on
//     (a PUBLISH reaches them as well, and is passed on by the home alone).
//   - Shard channels (SSUBSCRIBE) live on their slot's master, a connection per master.
//
// A failover, or a node that closes its connection, ends the subscriber's connection, as a
// Redis server that goes away ends its subscribers'.

// slotZeroKey is a key of slot 0: its master is the pub/sub home.
var slotZeroKey = func() []byte {
	for i := 0; ; i++ {
		k := []byte("pubsub-home-" + strconv.Itoa(i))
		if Slot(k) == 0 {
			return k
		}
	}
}()

// pubsubHome is the master where channels and patterns are subscribed and PUBLISH goes.
func (c *Cluster) pubsubHome(ctx context.Context) (string, error) {
	if c.opt.Standalone != "" {
		return c.opt.Standalone, nil
	}
	return c.slotMaster(ctx, 0, slotZeroKey)
}

// Subscriber is a client's subscriber mode upstream: its connections of its own, to the
// pub/sub home, to the other masters for notifications, and to the masters of its shard
// channels. What the client sends goes where it belongs; every message and reply comes back
// raw through Next. It is safe for concurrent use by one sender and one reader.
type Subscriber struct {
	c      *Cluster
	home   *subConn
	mu     sync.Mutex // guards events and shards
	events []*subConn // every other master, once a subscription may match a notification
	shards map[string]*subConn
	msgs   chan subMsg
	done   chan struct{}
	once   sync.Once
}

// subConn is one of a Subscriber's connections.
type subConn struct {
	s    *Subscriber
	c    *conn
	addr string
	kind subKind
	mu   sync.Mutex
	// pings are the PINGs sent and not answered, in order: nil for a client's, whose answer
	// is passed on, or the channel that takes the answer to the proxy's own (see Probe).
	pings []chan []byte
	// acks wait, in order, for an events connection's (P)SUBSCRIBE confirmations: its
	// subscriptions are in force before the home's confirmation reaches the client.
	acks []*ackWait
}

// ackWait is one (P)SUBSCRIBE sent to an events connection: n confirmations to come, done
// closed once they have.
type ackWait struct {
	n    int
	done chan struct{}
}

type subKind int

const (
	subHome   subKind = iota
	subEvents         // only notifications are passed on
	subShard
)

// subMsg is what a connection read: a reply or message for the client, an error, or the answer
// to a probe's PING (probe set), which Next hands to the probe in its turn, so that Probe
// returns once everything read before it has been taken.
type subMsg struct {
	raw   []byte
	err   error
	probe chan []byte
}

// Subscribe opens a client's subscriber connections, with the pub/sub home's first.
func (c *Cluster) Subscribe(ctx context.Context, first [][]byte) (*Subscriber, error) {
	addr, err := c.pubsubHome(ctx)
	if err != nil {
		return nil, err
	}
	s := &Subscriber{c: c, shards: map[string]*subConn{}, msgs: make(chan subMsg, 64), done: make(chan struct{})}
	if s.home, err = s.open(ctx, addr, subHome); err != nil {
		return nil, err
	}
	return s, nil
}

// open dials a connection of the subscriber's and starts reading it.
func (s *Subscriber) open(ctx context.Context, addr string, kind subKind) (*subConn, error) {
	if err := s.c.own.get(ctx, addr); err != nil {
		return nil, err
	}
	cn, err := s.c.node(addr).dial(ctx)
	if err != nil {
		s.c.own.put(addr)
		return nil, err
	}
	cn.own, cn.ownAddr = &s.c.own, addr
	sc := &subConn{s: s, c: cn, addr: addr, kind: kind}
	go sc.pump()
	return sc, nil
}

// pump reads the connection's replies and messages, and passes on what the client is owed.
func (sc *subConn) pump() {
	for {
		msg, err := resp.ReadReply(sc.c.r)
		if err != nil {
			sc.s.deliver(subMsg{err: err})
			return
		}
		if sc.kind == subEvents {
			switch kind, channel := messageOf(msg); kind {
			case "message", "pmessage":
				if notifyChannel(channel) {
					sc.s.deliver(subMsg{raw: msg})
				}
			case "subscribe", "psubscribe":
				sc.acked()
			}
			continue // its other replies, and the PUBLISHes the home passes on
		}
		if isPingReply(msg) {
			sc.mu.Lock()
			var own chan []byte
			if len(sc.pings) > 0 {
				own, sc.pings = sc.pings[0], sc.pings[1:]
			}
			sc.mu.Unlock()
			if own != nil {
				sc.s.deliver(subMsg{raw: msg, probe: own})
				continue
			}
		}
		sc.s.deliver(subMsg{raw: msg})
	}
}

func (s *Subscriber) deliver(m subMsg) {
	select {
	case s.msgs <- m:
	case <-s.done:
	}
}

// acked counts a confirmation against the oldest (P)SUBSCRIBE waiting for one.
func (sc *subConn) acked() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(sc.acks) == 0 {
		return
	}
	a := sc.acks[0]
	if a.n--; a.n <= 0 {
		close(a.done)
		sc.acks = sc.acks[1:]
	}
}

// messageOf is the kind of a reply Redis sends a subscriber (its array's or push's first
// element: "message", "pmessage", "subscribe", ...) and, for a message, its channel.
func messageOf(msg []byte) (kind string, channel []byte) {
	els, err := resp.SplitArray(msg)
	if err != nil || len(els) == 0 {
		return "", nil
	}
	kind = string(bulkValue(els[0]))
	switch {
	case kind == "message" && len(els) == 3:
		channel = bulkValue(els[1])
	case kind == "pmessage" && len(els) == 4:
		channel = bulkValue(els[2])
	}
	return kind, channel
}

// subscribedPong starts the reply to PING in subscriber mode (over RESP2).
var subscribedPong = []byte("*2\r\n$4\r\npong\r\n")

// isPingReply: PING answers an array starting with "pong" in subscriber mode, and +PONG or a
// bulk string out of it; nothing else Redis sends a subscriber is a simple or bulk string.
func isPingReply(msg []byte) bool {
	return bytes.HasPrefix(msg, subscribedPong) || len(msg) > 0 && (msg[0] == '+' || msg[0] == '$')
}

// send writes one command, within the upstream timeout: the write has a deadline, the
// connection's reads none (a subscription lasts as long as the client holds it).
func (sc *subConn) send(args [][]byte) error {
	_ = sc.c.nc.SetWriteDeadline(time.Now().Add(sc.s.c.opt.Timeout))
	_, err := sc.c.nc.Write(appendCommand(nil, args))
	return err
}

// Send writes one command where it belongs: (P)SUBSCRIBE and (P)UNSUBSCRIBE to the home (and
// what may match notifications to every other master too), (S)SUBSCRIBE and SUNSUBSCRIBE to
// their channels' masters, anything else (PING, a RESP3 client's command) to the home.
func (s *Subscriber) Send(ctx context.Context, args [][]byte) error {
	name := strings.ToLower(string(args[0]))
	switch name {
	case "subscribe", "psubscribe":
		var notify [][]byte
		for _, a := range args[1:] {
			if (name == "subscribe" && notifyChannel(a)) || (name == "psubscribe" && mayMatchNotify(a)) {
				notify = append(notify, a)
			}
		}
		if len(notify) > 0 {
			// The other masters' subscriptions first, confirmed: once the client has the
			// home's confirmation, every master's notifications reach it, as on one server.
			if err := s.subscribeEvents(ctx, append([][]byte{args[0]}, notify...)); err != nil {
				return err
			}
		}
		return s.home.send(args)
	case "unsubscribe", "punsubscribe":
		if err := s.home.send(args); err != nil {
			return err
		}
		s.mu.Lock()
		events := s.events
		s.mu.Unlock()
		for _, ec := range events {
			if err := ec.send(args); err != nil {
				return err
			}
		}
		return nil
	case "ssubscribe", "sunsubscribe":
		return s.sendShard(ctx, args)
	case "ping":
		s.home.mu.Lock()
		s.home.pings = append(s.home.pings, nil)
		s.home.mu.Unlock()
	}
	return s.home.send(args)
}

// sendShard sends SSUBSCRIBE or SUNSUBSCRIBE to the master of its channels' slot (Redis
// answers CROSSSLOT for channels of several slots, as it would); a SUNSUBSCRIBE of every
// channel to each shard connection, or to the home when there is none (Redis then answers
// that nothing was subscribed).
func (s *Subscriber) sendShard(ctx context.Context, args [][]byte) error {
	if len(args) == 1 {
		s.mu.Lock()
		shards := make([]*subConn, 0, len(s.shards))
		for _, sc := range s.shards {
			shards = append(shards, sc)
		}
		s.mu.Unlock()
		if len(shards) == 0 {
			return s.home.send(args)
		}
		for _, sc := range shards {
			if err := sc.send(args); err != nil {
				return err
			}
		}
		return nil
	}
	addr, err := s.c.masterAddr(ctx, args[1])
	if err != nil {
		return err
	}
	s.mu.Lock()
	sc := s.shards[addr]
	s.mu.Unlock()
	if sc == nil {
		dctx, cancel := context.WithTimeout(ctx, s.c.opt.DialTimeout+s.c.opt.Timeout)
		sc, err = s.open(dctx, addr, subShard)
		cancel()
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.shards[addr] = sc
		s.mu.Unlock()
	}
	return sc.send(args)
}

// Probe asks whether the client still has a subscription, with a PING of the proxy's own to
// the home and each shard connection (over RESP2 a subscribed connection answers PING with an
// array); the answers are not passed on. Another goroutine must be calling Next, which hands
// each answer over after what came before it.
func (s *Subscriber) Probe(ctx context.Context) (bool, error) {
	s.mu.Lock()
	conns := []*subConn{s.home}
	for _, sc := range s.shards {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	answers := make([]chan []byte, len(conns))
	for i, sc := range conns {
		answers[i] = make(chan []byte, 1)
		sc.mu.Lock()
		sc.pings = append(sc.pings, answers[i])
		sc.mu.Unlock()
		if err := sc.send([][]byte{[]byte("PING")}); err != nil {
			return false, err
		}
	}
	subscribed := false
	for _, a := range answers {
		select {
		case msg := <-a:
			subscribed = subscribed || bytes.HasPrefix(msg, subscribedPong)
		case <-s.done:
			return false, errSubscriberClosed
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return subscribed, nil
}

var errSubscriberClosed = errors.New("the subscriber's connection is closed")

// Next waits for the next reply or message, as raw RESP; an error once a connection failed
// or Close was called.
func (s *Subscriber) Next() ([]byte, error) {
	for {
		select {
		case m := <-s.msgs:
			if m.probe != nil {
				m.probe <- m.raw
				continue
			}
			return m.raw, m.err
		case <-s.done:
			return nil, errSubscriberClosed
		}
	}
}

// Close closes every connection; Next then returns an error.
func (s *Subscriber) Close() {
	s.once.Do(func() {
		close(s.done)
		s.home.c.close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, sc := range s.events {
			sc.c.close()
		}
		for _, sc := range s.shards {
			sc.c.close()
		}
	})
}
