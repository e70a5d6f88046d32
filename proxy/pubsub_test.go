package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"

	"seckill-proxy/conf"
	"seckill-proxy/internal/resp"
	"seckill-proxy/internal/testenv"
)

// TestPublishCountsAsOneServer: PUBLISH through the proxy answers the number of subscribers,
// as redis-server does for the same subscribers: two on the channel and one pattern, some on
// a second proxy. Before, the subscribers sat on a random master and PUBLISH went to another
// at random, and answered 0 in 13 runs of 18. 20 runs, each against redis-server first.
func TestPublishCountsAsOneServer(t *testing.T) { eachUpstream(t, testPublishCounts) }

func testPublishCounts(t *testing.T, s *stack) {
	second := s
	if s.cfg.Redis.Mode != conf.ModeStandalone {
		second = start(t, nil) // a second proxy in front of the same cluster
	}
	direct := testenv.Standalone(t)
	for run := range 20 {
		counts := map[string]string{}
		for _, via := range []struct{ name, a, b string }{{"redis-server", direct, direct}, {"proxies", s.addr, second.addr}} {
			// Names of this run's own: in front of one server, the last run's subscribers
			// may still be leaving it.
			topic := "news" + xid.New().String()
			ch := topic + ":1"
			subs := []*rawClient{dialRaw(t, via.a), dialRaw(t, via.b), dialRaw(t, via.b)}
			subs[0].do(t, "SUBSCRIBE", ch)
			subs[1].do(t, "SUBSCRIBE", ch, "other:"+ch)
			readMessage(t, subs[1]) // the second channel's confirmation
			subs[2].do(t, "PSUBSCRIBE", topic+":*")
			pub := dialRaw(t, via.a)
			counts[via.name] = pub.do(t, "PUBLISH", ch, "hello")
			for _, sc := range subs {
				if msg := readMessage(t, sc); !strings.HasSuffix(msg, "$5\r\nhello\r\n") {
					t.Fatalf("run %d via %s: message %q", run, via.name, msg)
				}
				_ = sc.c.Close()
			}
		}
		if counts["proxies"] != counts["redis-server"] || counts["proxies"] != ":3\r\n" {
			t.Fatalf("run %d: PUBLISH through the proxies = %q, redis-server = %q", run, counts["proxies"], counts["redis-server"])
		}
	}
	// PUBSUB NUMSUB counts where PUBLISH does.
	ch := "numsub:" + xid.New().String()
	sub := dialRaw(t, second.addr)
	sub.do(t, "SUBSCRIBE", ch)
	want := "*2\r\n$" + strconv.Itoa(len(ch)) + "\r\n" + ch + "\r\n:1\r\n"
	if got := dialRaw(t, s.addr).do(t, "PUBSUB", "NUMSUB", ch); got != want {
		t.Fatalf("PUBSUB NUMSUB = %q, want %q", got, want)
	}
}

// TestKeyspaceEventsFromEveryMaster: keyspace and keyevent notifications, which each Redis
// node sends only to its own subscribers, arrive from keys on all three masters, each once;
// and a PUBLISH, which reaches every node, still arrives once to a pattern that matches both.
func TestKeyspaceEventsFromEveryMaster(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.cfg.Redis.Addrs})
	t.Cleanup(func() { _ = direct.Close() })
	notify := func(v string) {
		t.Helper()
		if err := direct.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.ConfigSet(ctx, "notify-keyspace-events", v).Err()
		}); err != nil {
			t.Fatal(err)
		}
	}
	notify("KEA")
	t.Cleanup(func() { notify("") })

	prefix := "ks" + xid.New().String() + ":"
	space, event, all := dialRaw(t, s.addr), dialRaw(t, s.addr), dialRaw(t, s.addr)
	space.do(t, "PSUBSCRIBE", "__keyspace@0__:"+prefix+"*")
	event.do(t, "SUBSCRIBE", "__keyevent@0__:set")
	all.do(t, "PSUBSCRIBE", "*")

	const n = 30
	keys := make([]string, n)
	masters := map[string]bool{}
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
		addr, err := direct.MasterForKey(ctx, keys[i])
		if err != nil {
			t.Fatal(err)
		}
		masters[addr.Options().Addr] = true
	}
	if len(masters) < 3 {
		t.Fatalf("the keys sit on %d masters; the test needs all three", len(masters))
	}
	writer := dialRaw(t, s.addr)
	for _, k := range keys {
		if got := writer.do(t, "SET", k, "v"); got != "+OK\r\n" {
			t.Fatalf("SET %s = %q", k, got)
		}
	}
	ch := "plain:" + xid.New().String()
	if got := writer.do(t, "PUBLISH", ch, "once"); got != ":1\r\n" {
		t.Fatalf("PUBLISH to the * pattern = %q", got)
	}
	// What each subscriber got of this test's keys (and channel), counted by channel and key.
	// It runs on a goroutine of its own: a message that does not come ends the count short.
	collect := func(c *rawClient, want int, of func(channel, payload string) (string, bool)) map[string]int {
		got := map[string]int{}
		total := 0
		_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for total < want {
			raw, err := resp.ReadReply(c.r)
			if err != nil {
				return got
			}
			channel, payload := messageFields(string(raw))
			if k, ok := of(channel, payload); ok {
				got[k]++
				total++
			}
		}
		// Anything more of ours that comes within a moment is a duplicate.
		_ = c.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		for {
			raw, err := resp.ReadReply(c.r)
			if err != nil {
				break
			}
			channel, payload := messageFields(string(raw))
			if k, ok := of(channel, payload); ok {
				got[k]++
			}
		}
		return got
	}
	ours := func(key string) bool { return strings.HasPrefix(key, prefix) }
	check := func(who string, got map[string]int, want []string) {
		t.Helper()
		for _, w := range want {
			if got[w] != 1 {
				t.Errorf("%s: %q came %d times, want once", who, w, got[w])
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d distinct, want %d", who, len(got), len(want))
		}
	}
	var wg sync.WaitGroup
	var spaceGot, eventGot, allGot map[string]int
	wg.Go(func() {
		spaceGot = collect(space, n, func(channel, payload string) (string, bool) {
			k := strings.TrimPrefix(channel, "__keyspace@0__:")
			return k, ours(k) && payload == "set"
		})
	})
	wg.Go(func() {
		eventGot = collect(event, n, func(channel, payload string) (string, bool) { return payload, ours(payload) })
	})
	wg.Go(func() {
		allGot = collect(all, 2*n+1, func(channel, payload string) (string, bool) {
			switch {
			case channel == ch:
				return ch, true
			case strings.HasPrefix(channel, "__keyspace@0__:") && ours(strings.TrimPrefix(channel, "__keyspace@0__:")):
				return channel, true
			case channel == "__keyevent@0__:set" && ours(payload):
				return channel + " " + payload, true
			}
			return "", false
		})
	})
	wg.Wait()
	var wantAll []string
	for _, k := range keys {
		wantAll = append(wantAll, "__keyspace@0__:"+k, "__keyevent@0__:set "+k)
	}
	check("PSUBSCRIBE __keyspace@0__:<prefix>*", spaceGot, keys)
	check("SUBSCRIBE __keyevent@0__:set", eventGot, keys)
	check("PSUBSCRIBE *", allGot, append(wantAll, ch))
}

// TestShardChannelsFollowTheSlot: one client's SSUBSCRIBE to shard channels of slots on two
// masters gets each SPUBLISH once, and SPUBLISH counts its subscriber.
func TestShardChannelsFollowTheSlot(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.cfg.Redis.Addrs})
	t.Cleanup(func() { _ = direct.Close() })
	var chans []string
	seen := map[string]bool{}
	for i := 0; len(chans) < 2; i++ {
		ch := "shard" + strconv.Itoa(i) + ":" + xid.New().String()
		m, err := direct.MasterForKey(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		if !seen[m.Options().Addr] {
			seen[m.Options().Addr] = true
			chans = append(chans, ch)
		}
	}
	sub, pub := dialRaw(t, s.addr), dialRaw(t, s.addr)
	for _, ch := range chans {
		want := "*3\r\n$10\r\nssubscribe\r\n$" + strconv.Itoa(len(ch)) + "\r\n" + ch + "\r\n:1\r\n"
		if got := sub.do(t, "SSUBSCRIBE", ch); got != want {
			t.Fatalf("SSUBSCRIBE %s = %q, want %q", ch, got, want)
		}
	}
	for _, ch := range chans {
		if got := pub.do(t, "SPUBLISH", ch, "hi"); got != ":1\r\n" {
			t.Fatalf("SPUBLISH %s = %q", ch, got)
		}
		want := "*3\r\n$8\r\nsmessage\r\n$" + strconv.Itoa(len(ch)) + "\r\n" + ch + "\r\n$2\r\nhi\r\n"
		if got := readMessage(t, sub); got != want {
			t.Fatalf("smessage = %q, want %q", got, want)
		}
	}
	if got := sub.do(t, "GET", "x"); !strings.HasPrefix(got, "-ERR Can't execute 'get'") {
		t.Fatalf("GET while subscribed to shard channels = %q", got)
	}
}

// readMessage reads the next message a subscriber gets, within 5 s.
func readMessage(t *testing.T, c *rawClient) string {
	t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	raw, err := resp.ReadReply(c.r)
	if err != nil {
		t.Fatalf("no message: %v", err)
	}
	return string(raw)
}

// messageFields are a (p|s)message's channel and payload ("" for anything else).
func messageFields(raw string) (channel, payload string) {
	els, err := resp.SplitArray([]byte(raw))
	if err != nil || len(els) < 3 {
		return "", ""
	}
	body := func(b []byte) string {
		_, v, _ := strings.Cut(string(b), "\r\n")
		return strings.TrimSuffix(v, "\r\n")
	}
	switch body(els[0]) {
	case "message", "smessage":
		return body(els[1]), body(els[2])
	case "pmessage":
		if len(els) == 4 {
			return body(els[2]), body(els[3])
		}
	}
	return "", ""
}

// subscriptionHold is how long TestSubscriptionsLast holds its subscriptions: past every
// timeout of its proxies' configuration (the subscriber's 5 s dial among them).
const subscriptionHold = 60 * time.Second

// TestSubscriptionsLast: every kind of subscription through the proxy lasts as long as its
// client holds it, and loses no message: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, a RESP3
// subscriber and a keyspace channel (held on every master), in front of the cluster and of one
// server, with a message each second for a minute. Before, each was cut 5 s in: its upstream
// connection kept the deadline of its dial.
func TestSubscriptionsLast(t *testing.T) {
	short := func(c *conf.Config) { c.Redis.CommandTimeout, c.Redis.DialTimeout = time.Second, 500*time.Millisecond }
	stacks := map[string]*stack{"cluster": start(t, short), "standalone": startStandalone(t, short)}
	ctx := context.Background()
	notify := func(v string) {
		t.Helper()
		direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: stacks["cluster"].cfg.Redis.Addrs})
		defer direct.Close()
		if err := direct.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.ConfigSet(ctx, "notify-keyspace-events", v).Err()
		}); err != nil {
			t.Fatal(err)
		}
		one := redis.NewClient(&redis.Options{Addr: testenv.Standalone(t)})
		defer one.Close()
		if err := one.ConfigSet(ctx, "notify-keyspace-events", v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	notify("K$")
	t.Cleanup(func() { notify("") })
	type sub struct {
		name, via string
		c         *rawClient
		// send makes the next message: a command with the payload last, and its reply
		send  []string
		reply string
		event string // the payload a keyspace notification carries ("" : the one sent)
		got   int
	}
	var subs []*sub
	for via, s := range stacks {
		id := xid.New().String()
		add := func(sb *sub, setup ...[]string) {
			sb.via, sb.c = via, dialRaw(t, s.addr)
			if sb.reply == "" {
				sb.reply = ":1\r\n"
			}
			for _, cmd := range setup {
				if reply := sb.c.do(t, cmd...); strings.HasPrefix(reply, "-") {
					t.Fatalf("%s via %s: %v = %q", sb.name, via, cmd, reply)
				}
			}
			subs = append(subs, sb)
		}
		add(&sub{name: "SUBSCRIBE", send: []string{"PUBLISH", "last:" + id}}, []string{"SUBSCRIBE", "last:" + id})
		add(&sub{name: "PSUBSCRIBE", send: []string{"PUBLISH", "plast:" + id + ":x"}}, []string{"PSUBSCRIBE", "plast:" + id + ":*"})
		add(&sub{name: "SSUBSCRIBE", send: []string{"SPUBLISH", "slast:" + id}}, []string{"SSUBSCRIBE", "slast:" + id})
		add(&sub{name: "RESP3 SUBSCRIBE", send: []string{"PUBLISH", "r3last:" + id}}, []string{"HELLO", "3"}, []string{"SUBSCRIBE", "r3last:" + id})
		add(&sub{name: "keyspace SUBSCRIBE", send: []string{"SET", "klast:" + id}, reply: "+OK\r\n", event: "set"},
			[]string{"SUBSCRIBE", "__keyspace@0__:klast:" + id})
	}
	pubs := map[string]*rawClient{}
	for via, s := range stacks {
		pubs[via] = dialRaw(t, s.addr)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	sent := 0
	for end := time.Now().Add(subscriptionHold); time.Now().Before(end); <-tick.C {
		sent++
		payload := "m" + strconv.Itoa(sent)
		for _, sb := range subs {
			if got := pubs[sb.via].do(t, append(sb.send, payload)...); got != sb.reply {
				t.Fatalf("after %d s, %s via %s: %v = %q, want %q", sent, sb.name, sb.via, sb.send, got, sb.reply)
			}
			want := payload
			if sb.event != "" {
				want = sb.event
			}
			if _, p := messageFields(readMessage(t, sb.c)); p != want {
				t.Fatalf("after %d s, %s via %s got %q, want %q", sent, sb.name, sb.via, p, want)
			}
			sb.got++
		}
	}
	for _, sb := range subs {
		if sb.got != sent || sent < int(subscriptionHold/time.Second)-1 {
			t.Errorf("%s via %s: %d messages of %d", sb.name, sb.via, sb.got, sent)
		}
	}
}

// TestOutcomePatternReachesRedis: PSUBSCRIBE seckill:outcome:* on a fresh connection is a
// pattern of Redis's, as docs/COMMANDS.md says, not the "another connection" refusal it got.
func TestOutcomePatternReachesRedis(t *testing.T) {
	s := start(t, nil)
	c := dialRaw(t, s.addr)
	want := "*3\r\n$10\r\npsubscribe\r\n$17\r\nseckill:outcome:*\r\n:1\r\n"
	if got := c.do(t, "PSUBSCRIBE", "seckill:outcome:*"); got != want {
		t.Fatalf("PSUBSCRIBE seckill:outcome:* = %q, want %q", got, want)
	}
	if got := c.do(t, "SUBSCRIBE", "seckill:outcome:sku/uid"); !strings.HasPrefix(got, "-ERR outcome channels") {
		t.Fatalf("an outcome channel beside Redis's pattern = %q, want the refusal", got)
	}
}

// TestUnsubscribeOutsideSubscriberMode: an UNSUBSCRIBE, PUNSUBSCRIBE or SUNSUBSCRIBE from a
// connection that subscribed to nothing answers byte for byte as redis-server does, in RESP2
// and RESP3 (one reply per channel named, or one with a nil channel), and the connection goes
// on as before.
func TestUnsubscribeOutsideSubscriberMode(t *testing.T) {
	eachUpstream(t, func(t *testing.T, s *stack) {
		for _, proto := range []string{"2", "3"} {
			proxy, direct := dialRaw(t, s.addr), dialRaw(t, testenv.Standalone(t))
			for _, c := range []*rawClient{proxy, direct} {
				if got := c.do(t, "HELLO", proto); strings.HasPrefix(got, "-") {
					t.Fatalf("HELLO %s = %q", proto, got)
				}
			}
			for _, cmd := range [][]string{{"UNSUBSCRIBE"}, {"PUNSUBSCRIBE"}, {"SUNSUBSCRIBE"}, {"UNSUBSCRIBE", "a", "b"}, {"PUNSUBSCRIBE", "p*"}, {"SUNSUBSCRIBE", "{s}x"}} {
				raw := respCmd(cmd...) + respCmd("PING")
				n := max(1, len(cmd)-1) + 1
				want := readAll(t, direct, raw, n)
				if got := readAll(t, proxy, raw, n); got != want {
					t.Errorf("RESP%s %v then PING = %q, redis-server's %q", proto, cmd, got, want)
				}
			}
		}
	})
}

// readAll writes raw and reads n replies, concatenated.
func readAll(t *testing.T, c *rawClient, raw string, n int) string {
	t.Helper()
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.c.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for range n {
		r, err := resp.ReadReply(c.r)
		if err != nil {
			t.Fatalf("after %q: %v", b.String(), err)
		}
		b.Write(r)
	}
	return b.String()
}
