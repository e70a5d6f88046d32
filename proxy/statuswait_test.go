package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/internal/resp"
	"seckill-proxy/sale"
)

// errOutcomeMixedText is the refusal of outcome channels and Redis's on one connection.
const errOutcomeMixedText = "ERR outcome channels (seckill:outcome:<sku>/<uid>) are served by seckill-proxy on a connection of their own: subscribe to Redis's channels and patterns on another"

// field is the value of one of the proxy's INFO seckill counters.
func (s *stack) field(name string) int64 {
	for _, f := range s.fields() {
		if f.Name == name {
			v, _ := f.Value.(int64)
			return v
		}
	}
	return -1
}

// statusWait sends SECKILL.STATUS <sku> <uid> WAIT <ms> on a connection of its own, and gives
// its reply (or error text) on the channel once it comes.
func statusWait(t *testing.T, s *stack, sku, uid, ms string) <-chan string {
	t.Helper()
	c := dialRaw(t, s.addr)
	send(t, c, "SECKILL.STATUS", sku, uid, "WAIT", ms)
	out := make(chan string, 1)
	go func() {
		_ = c.c.SetReadDeadline(time.Now().Add(90 * time.Second))
		line, err := c.r.ReadString('\n')
		if err != nil {
			out <- "read error: " + err.Error()
			return
		}
		if strings.HasPrefix(line, "$") {
			body, _ := c.r.ReadString('\n')
			line = body
		}
		out <- strings.TrimSuffix(line, "\r\n")
	}()
	return out
}

// TestStatusWait: SECKILL.STATUS ... WAIT blocks until the sink has stored the order, woken by
// the sale's outcome stream with no Redis call of its own (the catch-up is set to a minute
// here, so that only the stream can wake it in time): confirmed, rejected when an operator
// set MySQL's stock by hand (the seeds' story), and on a second proxy that sold nothing of it;
// it answers at once for a buyer with no order, answers pending at its timeout, is forgotten
// when its client leaves, and is refused inside MULTI and for bad arguments.
func TestStatusWait(t *testing.T) {
	slowResync := func(c *conf.Config) { c.Status.Resync = time.Minute }
	s := start(t, slowResync)
	other := startProxy(t, s.cfg, true) // the same topic: a second proxy of the same sales
	c := s.client(t, 4)
	ctx := context.Background()
	sku := newSKU("wait")
	s.sale(t, c, sku, 2)
	// An operator sets MySQL's stock to 1 by hand, as in the seeds' story: of the two orders
	// Redis sells, the sink rejects one.
	if _, err := s.db.Exec(`UPDATE seckill_items SET stock = 1 WHERE sku = ?`, sku); err != nil {
		t.Fatal(err)
	}
	first, err := c.Do(ctx, "seckill.buy", sku, "alice").Text()
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Do(ctx, "seckill.buy", sku, "bob").Text()
	if err != nil {
		t.Fatal(err)
	}

	// No sink yet: the waits block.
	alice := statusWait(t, s, sku, "alice", "30000")
	bob := statusWait(t, other, sku, "bob", "30000")
	eventually(t, 5*time.Second, "both buyers wait", func() bool {
		return s.field("status_waiting") == 1 && other.field("status_waiting") == 1
	})
	none := statusWait(t, s, sku, "carol", "30000")
	select {
	case got := <-none:
		if got != "none" {
			t.Fatalf("a buyer with no order: %q, want none at once", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a buyer with no order waited")
	}
	start := time.Now()
	if got := <-statusWait(t, s, sku, "alice", "300"); got != "pending "+first {
		t.Fatalf("WAIT 300 with no sink: %q", got)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("WAIT 300 answered after %v", d)
	}
	// A client that leaves is forgotten.
	gone := dialRaw(t, s.addr)
	send(t, gone, "SECKILL.STATUS", sku, "alice", "WAIT", "60000")
	eventually(t, 5*time.Second, "the third wait begins", func() bool { return s.field("status_waiting") == 2 })
	_ = gone.c.Close()
	eventually(t, 5*time.Second, "the client that left is forgotten", func() bool { return s.field("status_waiting") == 1 })

	runSink(t, s.cfg)
	got := map[string]string{}
	for _, w := range []struct {
		name string
		ch   <-chan string
	}{{"alice", alice}, {"bob", bob}} {
		select {
		case got[w.name] = <-w.ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s was not woken within 20 s of the sink's start", w.name)
		}
	}
	// Kafka's partition order decides which of the two the sink stored first.
	outcomes := []string{got["alice"], got["bob"]}
	confirmed, rejected := 0, 0
	for i, o := range outcomes {
		id := []string{first, second}[i]
		switch {
		case o == "confirmed "+id:
			confirmed++
		case strings.HasPrefix(o, "rejected "+id+" "):
			rejected++
		default:
			t.Errorf("outcome %q for order %s", o, id)
		}
	}
	if confirmed != 1 || rejected != 1 {
		t.Errorf("outcomes %q: want one confirmed and one rejected", outcomes)
	}
	if s.field("status_woken") != 1 || other.field("status_woken") != 1 || s.field("status_resynced") != 0 {
		t.Errorf("woken %d and %d by the stream, %d by the catch-up; want 1, 1 and 0",
			s.field("status_woken"), other.field("status_woken"), s.field("status_resynced"))
	}
	if got := <-statusWait(t, s, sku, "alice", "30000"); got != outcomes[0] {
		t.Errorf("a wait for a known outcome: %q, want %q at once", got, outcomes[0])
	}
	eventually(t, 5*time.Second, "no buyer waits", func() bool {
		return s.field("status_waiting") == 0 && s.field("status_outcome_readers") == 0
	})

	raw := dialRaw(t, s.addr)
	for _, tc := range []struct{ cmd []string }{
		{[]string{"SECKILL.STATUS", sku, "alice", "WAIT", "-1"}},
		{[]string{"SECKILL.STATUS", sku, "alice", "WAIT", "soon"}},
		{[]string{"SECKILL.STATUS", sku, "alice", "BLOCK", "5"}},
		{[]string{"SECKILL.STATUS", sku, "alice", "WAIT"}},
		{[]string{"SECKILL.STATUS", sku, "alice", "WAIT", "5", "x"}},
	} {
		if got := raw.do(t, tc.cmd...); !strings.HasPrefix(got, "-ERR") {
			t.Errorf("%q = %q, want an ERR", tc.cmd, got)
		}
	}
	raw.do(t, "MULTI")
	if got := raw.do(t, "SECKILL.STATUS", sku, "alice", "WAIT", "5"); !strings.Contains(got, "not allowed inside MULTI") {
		t.Errorf("STATUS WAIT inside MULTI = %q", got)
	}
	raw.do(t, "DISCARD")
}

// TestStatusWaitBound: past status.max_waiters a wait is refused with BUSY, and WAIT longer
// than status.max_wait (or WAIT 0) waits status.max_wait.
func TestStatusWaitBound(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Status.MaxWaiters, c.Status.MaxWait = 2, 500*time.Millisecond })
	c := s.client(t, 4)
	sku := newSKU("waitcap")
	s.sale(t, c, sku, 10)
	for _, uid := range []string{"a", "b", "c"} {
		if err := c.Do(context.Background(), "seckill.buy", sku, uid).Err(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := statusWait(t, s, sku, "a", "0"), statusWait(t, s, sku, "b", "600000")
	eventually(t, 5*time.Second, "two buyers wait", func() bool { return s.field("status_waiting") == 2 })
	if got := <-statusWait(t, s, sku, "c", "1000"); !strings.HasPrefix(got, "-BUSY too many buyers") {
		t.Fatalf("a third wait = %q, want BUSY", got)
	}
	start := time.Now()
	for _, ch := range []<-chan string{a, b} {
		if got := <-ch; !strings.HasPrefix(got, "pending ") {
			t.Fatalf("wait = %q", got)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the waits took %v; status.max_wait is 500 ms", d)
	}
}

// TestStatusWaitPerBuyer: one buyer's waits are a set, so that others' subscriptions to the
// buyer's channel (an app user can list every buyer with HSCAN) never refuse the buyer's own
// wait. Before, 16 subscriptions to a victim's channel made the victim's WAIT answer -BUSY.
// Every subscriber, and the victim's wait, gets the outcome's pending status at the end.
func TestStatusWaitPerBuyer(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Status.MaxWait = 2 * time.Second })
	c := s.client(t, 4)
	sku := newSKU("waitper")
	s.sale(t, c, sku, 10)
	if err := c.Do(context.Background(), "seckill.buy", sku, "a").Err(); err != nil {
		t.Fatal(err)
	}
	const others = 40
	ch := sale.OutcomeChannel(sku, "a")
	for i := range others {
		sub := dialRaw(t, s.addr)
		if got := sub.do(t, "SUBSCRIBE", ch); !strings.Contains(got, "subscribe") {
			t.Fatalf("subscription %d = %q", i, got)
		}
		if _, p := messageFields(readMessage(t, sub)); !strings.HasPrefix(p, "pending ") {
			t.Fatalf("subscription %d's first message %q, want pending", i, p)
		}
	}
	eventually(t, 5*time.Second, "40 waits on one buyer", func() bool { return s.field("status_waiting") == others })
	if got := <-statusWait(t, s, sku, "a", "1000"); !strings.HasPrefix(got, "pending ") {
		t.Fatalf("the buyer's own wait beside %d others' = %q, want pending at its end", others, got)
	}
}

// TestOutcomeChannelBounds: one connection holds at most limits.outcome_channels_per_conn
// outcome channels, and the proxy at most limits.outcome_channels; past either, SUBSCRIBE
// answers -BUSY for that channel and the connection goes on. A channel of a buyer with no
// order holds no wait. Before, one connection subscribed 1,000,000 (1.1 GiB of RSS), or the
// channels of 50,000 pending buyers, which took every wait of the proxy.
func TestOutcomeChannelBounds(t *testing.T) {
	s := start(t, func(c *conf.Config) {
		c.Limits.OutcomeChannelsPerConn, c.Limits.OutcomeChannels, c.Limits.ClientShare = 50, 80, 1
	})
	c := s.client(t, 4)
	ctx := context.Background()
	sku := newSKU("chanbound")
	s.sale(t, c, sku, 100)
	for i := range 30 {
		if err := c.Do(ctx, "seckill.buy", sku, "p"+strconv.Itoa(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// subscribe sends one SUBSCRIBE of n channels (the pending buyers' first) and counts
	// the confirmations and the refusals.
	subscribe := func(sub *rawClient, from, n int) (ok, busy int) {
		args := []string{"SUBSCRIBE"}
		for i := from; i < from+n; i++ {
			uid := "nobody" + strconv.Itoa(i)
			if i < 30 {
				uid = "p" + strconv.Itoa(i)
			}
			args = append(args, sale.OutcomeChannel(sku, uid))
		}
		send(t, sub, args...)
		for ok+busy < n {
			raw := readMessage(t, sub)
			switch {
			case strings.HasPrefix(raw, "-BUSY"):
				busy++
			case strings.Contains(raw, "subscribe"):
				ok++
			}
		}
		return ok, busy
	}
	first := dialRaw(t, s.addr)
	if ok, busy := subscribe(first, 0, 60); ok != 50 || busy != 10 {
		t.Fatalf("60 channels on one connection: %d held, %d refused; want 50 and 10", ok, busy)
	}
	// The 30 pending buyers' channels wait; the 20 of buyers with no order hold nothing.
	eventually(t, 5*time.Second, "the pending buyers' waits", func() bool { return s.field("status_waiting") == 30 })
	if got := first.do(t, "PING"); !strings.Contains(got, "pong") {
		t.Fatalf("PING after the refusals = %q", got)
	}
	second := dialRaw(t, s.addr)
	if ok, busy := subscribe(second, 100, 40); ok != 30 || busy != 10 {
		t.Fatalf("40 more channels on a second connection: %d held, %d refused; want 30 and 10 (80 on the proxy)", ok, busy)
	}
	if got := s.field("outcome_channels"); got != 80 {
		t.Fatalf("outcome_channels = %d, want 80", got)
	}
	_ = first.c.Close()
	eventually(t, 5*time.Second, "the first connection's channels let go", func() bool {
		return s.field("outcome_channels") == 30 && s.field("status_waiting") == 0
	})
	if ok, busy := subscribe(second, 200, 20); ok != 20 || busy != 0 {
		t.Fatalf("20 more after the first connection left: %d held, %d refused", ok, busy)
	}
	if got := s.field("outcome_channels_refused"); got != 20 {
		t.Fatalf("outcome_channels_refused = %d, want 20", got)
	}
}

// TestOutcomeChannelShares: one user at one address holds limits.client_share of the proxy's
// outcome channels, over all its connections, and past it as many as leave one share free for
// others (a sidecar serves one user from one address: its own clients may take all but a
// share); past that SUBSCRIBE answers -BUSY naming the setting, another user at another
// address takes the share left, and a channel let go is taken again. Before, 100 connections
// of one user took all 100,000 of the proxy's channels with made-up buyers', and every real
// buyer got BUSY; then, 26 connections of one user took its share and every other client of
// that user got BUSY.
func TestOutcomeChannelShares(t *testing.T) {
	s := start(t, func(c *conf.Config) {
		c.Limits.OutcomeChannelsPerConn, c.Limits.OutcomeChannels, c.Limits.ClientShare = 1000, 80, 0.25
		c.Users = []conf.User{{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}, {Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}}
	})
	sku := newSKU("chanshare")
	ops := redis.NewClient(&redis.Options{Addr: s.addr, Username: "ops", Password: "ops-pw"})
	t.Cleanup(func() { _ = ops.Close() })
	s.sale(t, ops, sku, 10)
	subscribe := func(sub *rawClient, from, n int) (ok, busy int) {
		args := []string{"SUBSCRIBE"}
		for i := from; i < from+n; i++ {
			args = append(args, sale.OutcomeChannel(sku, "nobody"+strconv.Itoa(i)))
		}
		send(t, sub, args...)
		for ok+busy < n {
			raw := readMessage(t, sub)
			switch {
			case strings.HasPrefix(raw, "-BUSY") && strings.Contains(raw, "limits.client_share"):
				busy++
			case strings.HasPrefix(raw, "-"):
				t.Fatalf("SUBSCRIBE: %q", raw)
			case strings.Contains(raw, "subscribe"):
				ok++
			}
		}
		return ok, busy
	}
	login := func(from, user, pw string) *rawClient {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		rc := &rawClient{c: c, r: bufio.NewReader(c)}
		if got := rc.do(t, "AUTH", user, pw); got != "+OK\r\n" {
			t.Fatalf("AUTH %s: %q", user, got)
		}
		return rc
	}
	first, second := login("127.0.0.1", "shop", "shop-pw"), login("127.0.0.1", "shop", "shop-pw")
	if ok, busy := subscribe(first, 0, 70); ok != 60 || busy != 10 {
		t.Fatalf("70 channels of one user: %d held, %d refused; want 60 and 10 (80 less a quarter)", ok, busy)
	}
	if ok, busy := subscribe(second, 100, 5); ok != 0 || busy != 5 {
		t.Fatalf("5 more on the same user's second connection: %d held, %d refused; want 0 and 5", ok, busy)
	}
	send(t, first, "UNSUBSCRIBE", sale.OutcomeChannel(sku, "nobody0"), sale.OutcomeChannel(sku, "nobody1"))
	for range 2 {
		if raw := readMessage(t, first); !strings.Contains(raw, "unsubscribe") {
			t.Fatalf("UNSUBSCRIBE: %q", raw)
		}
	}
	if ok, busy := subscribe(second, 200, 3); ok != 2 || busy != 1 {
		t.Fatalf("3 more after 2 let go: %d held, %d refused; want 2 and 1", ok, busy)
	}
	other := login("127.0.0.2", "ops", "ops-pw")
	if ok, busy := subscribe(other, 400, 25); ok != 20 || busy != 5 {
		t.Fatalf("25 of another user at another address: %d held, %d refused; want the share left, 20", ok, busy)
	}
	_ = first.c.Close()
	eventually(t, 5*time.Second, "the first connection's channels let go", func() bool { return s.field("outcome_channels") == 22 })
	if ok, busy := subscribe(second, 300, 40); ok != 38 || busy != 2 {
		t.Fatalf("40 more after the first connection left: %d held, %d refused; want 38 and 2", ok, busy)
	}
}

// TestMadeUpBuyersStartNothing: outcome channels of buyers with no order, in a sale this proxy
// knows, cost a status read each at most (batched) and start no outcome reader: a client that
// subscribes and unsubscribes made-up buyers' channels in a loop costs Redis no blocking read.
func TestMadeUpBuyersStartNothing(t *testing.T) {
	const n = 200
	s := start(t, nil)
	sku := newSKU("madeup")
	s.sale(t, s.client(t, 1), sku, 10)
	reads, started := s.field("status_reads"), s.field("status_outcome_readers_started")
	sub := dialRaw(t, s.addr)
	for round := range 2 {
		args := []string{"SUBSCRIBE"}
		for i := range n {
			args = append(args, sale.OutcomeChannel(sku, "nobody"+strconv.Itoa(i)))
		}
		send(t, sub, args...)
		for none := 0; none < n; {
			switch raw := readMessage(t, sub); {
			case strings.HasPrefix(raw, "-"):
				t.Fatalf("round %d: SUBSCRIBE: %q", round, raw)
			case strings.Contains(raw, "message") && strings.Contains(raw, "none"):
				none++
			case strings.Contains(raw, "message"):
				t.Fatalf("round %d: a made-up buyer's status: %q", round, raw)
			}
		}
		send(t, sub, "UNSUBSCRIBE")
		for range n {
			if raw := readMessage(t, sub); !strings.Contains(raw, "unsubscribe") {
				t.Fatalf("UNSUBSCRIBE: %q", raw)
			}
		}
	}
	if d := s.field("status_outcome_readers_started") - started; d != 0 {
		t.Fatalf("%d outcome readers started for %d made-up buyers' channels; want 0", d, 2*n)
	}
	if d := s.field("status_reads") - reads; d > 2*n {
		t.Fatalf("%d status reads for %d channels; want at most one each", d, 2*n)
	}
}

// TestStatusWaitMany: 10,000 buyers wait at once on one proxy, each on a connection of its
// own, and the sink's outcomes wake every one of them through the stream. The buyers'
// connections are held by a second process (this test binary again: waitClients), since one
// process may not hold 20,000 sockets here.
func TestStatusWaitMany(t *testing.T) {
	const n = 10000
	s := start(t, func(c *conf.Config) {
		c.Status.Resync = time.Minute
		c.Limits.MaxClients = 2 * n // the buyers and this test's own client
	})
	c := s.client(t, 32)
	ctx := context.Background()
	sku := newSKU("waitmany")
	s.sale(t, c, sku, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				id, err := c.Do(ctx, "seckill.buy", sku, "u"+strconv.Itoa(i)).Text()
				if err != nil {
					t.Errorf("buy %d: %v", i, err)
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), waitClientsEnv+"=wait "+s.addr+" "+sku+" "+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	eventually(t, 60*time.Second, "10,000 buyers wait", func() bool { return s.field("status_waiting") == n })
	started := time.Now()
	runSink(t, s.cfg)
	got := 0
	for lines.Scan() {
		i, reply, _ := strings.Cut(lines.Text(), " ")
		k, err := strconv.Atoi(i)
		if err != nil || k < 0 || k >= n {
			t.Fatalf("from the client process: %q", lines.Text())
		}
		if reply != "confirmed "+ids[k] {
			t.Fatalf("buyer %d: %q, want confirmed %s", k, reply, ids[k])
		}
		got++
	}
	if got != n {
		t.Fatalf("%d buyers answered, want %d", got, n)
	}
	t.Logf("10,000 waiting buyers woken %v after the sink started; woken by the stream %d, by the catch-up %d",
		time.Since(started).Round(time.Millisecond), s.field("status_woken"), s.field("status_resynced"))
	if s.field("status_woken") != n {
		t.Errorf("the stream woke %d of %d", s.field("status_woken"), n)
	}
}

// waitClientsEnv turns the test binary into the buyers' process of TestStatusWaitMany and
// BenchmarkStatusWait: "wait|poll <proxy address> <sku> <n>" (waitClients, pollClients).
const waitClientsEnv = "SECKILL_TEST_WAIT_CLIENTS"

func TestMain(m *testing.M) {
	if spec := os.Getenv(waitClientsEnv); spec != "" {
		f := strings.Fields(spec)
		if len(f) != 4 {
			os.Exit(2)
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			os.Exit(2)
		}
		if f[0] == "poll" {
			os.Exit(pollClients(f[1], f[2], n))
		}
		os.Exit(waitClients(f[1], f[2], n))
	}
	os.Exit(m.Run())
}

// waitClients opens n connections to the proxy, each sending SECKILL.STATUS <sku> u<i> WAIT
// 60000, and prints each reply as "<i> <reply>" as it comes; 0 once all n have come.
func waitClients(addr, sku string, n int) int {
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	failed := false
	for i := range n {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dial:", err)
			return 1
		}
		uid := "u" + strconv.Itoa(i)
		cmd := fmt.Sprintf("*5\r\n$14\r\nSECKILL.STATUS\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$4\r\nWAIT\r\n$5\r\n60000\r\n", len(sku), sku, len(uid), uid)
		if _, err := nc.Write([]byte(cmd)); err != nil {
			fmt.Fprintln(os.Stderr, "write:", err)
			return 1
		}
		wg.Go(func() {
			defer nc.Close()
			_ = nc.SetReadDeadline(time.Now().Add(5 * time.Minute))
			reply, err := resp.ReadReply(bufio.NewReader(nc))
			text := strings.TrimSuffix(string(reply), "\r\n")
			if _, body, ok := strings.Cut(text, "\r\n"); ok && strings.HasPrefix(text, "$") {
				text = body
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fmt.Fprintln(os.Stderr, "read:", err)
				failed = true
				return
			}
			fmt.Fprintf(w, "%d %s\n", i, text)
		})
	}
	wg.Wait()
	_ = w.Flush()
	if failed {
		return 1
	}
	return 0
}

// TestStatusWaitFailover: buyers wait while the master of their sale fails over; once the
// replica is promoted and the sink stores their orders, each is woken with its outcome
// before its timeout (by the stream on the new master, or the catch-up after the failed
// reads). Buyers who begin to wait while the master is down wait through it too (their first
// read is tried again), rather than being answered UNAVAILABLE, and so does an outcome channel
// subscribed then: confirmed at once, its status told once a read succeeds.
func TestStatusWaitFailover(t *testing.T) {
	needDevstack(t)
	t.Cleanup(func() {
		if err := devstack(t, "up"); err != nil {
			t.Errorf("could not restore the cluster: %v", err)
		}
	})
	s := start(t, func(c *conf.Config) {
		c.Buy.WaitReplicas, c.Buy.WaitTimeout = 1, 100*time.Millisecond // the orders reach the replica
		c.Status.Resync = time.Second
	})
	c := s.client(t, 8)
	ctx := context.Background()
	sku := newSKU("waitfail")
	s.sale(t, c, sku, 50)
	// n buyers wait before the master dies; late more begin to wait just after, while it is
	// down: their first reads fail, and are tried again until the promotion.
	const n, late = 20, 5
	ids := make([]string, n+late+1) // and one more, whose outcome channel is subscribed while the master is down
	for i := range n + late + 1 {
		id, err := c.Do(ctx, "seckill.buy", sku, "f"+strconv.Itoa(i)).Text()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	waits := make([]<-chan string, n)
	for i := range n {
		waits[i] = statusWait(t, s, sku, "f"+strconv.Itoa(i), "45000")
	}
	// status_waits counts a wait once its first status read found the order pending: until
	// then a buyer is registered (status_waiting) but its read may still fail with the master.
	eventually(t, 10*time.Second, "the buyers wait", func() bool { return s.field("status_waits") == n })

	_, pid, replica := saleNodes(t, s, sale.KeysFor(sku).Outcomes)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := n; i < n+late; i++ {
		waits = append(waits, statusWait(t, s, sku, "f"+strconv.Itoa(i), "45000"))
	}
	sub, subCh := dialRaw(t, s.addr), sale.OutcomeChannel(sku, "f"+strconv.Itoa(n+late))
	if got := sub.do(t, "SUBSCRIBE", subCh); !strings.HasPrefix(got, "*3\r\n$9\r\nsubscribe\r\n") {
		t.Fatalf("SUBSCRIBE to an outcome channel while the master is down = %q, want its confirmation", got)
	}
	eventually(t, 30*time.Second, "the replica is promoted", func() bool {
		role, err := replica.Do(ctx, "role").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
	runSink(t, s.cfg)
	for i, ch := range waits {
		if got := <-ch; got != "confirmed "+ids[i] {
			t.Errorf("buyer %d: %q, want confirmed %s", i, got, ids[i])
		}
	}
	// The channel's messages: the status now, once a read succeeds, then the outcome.
	_ = sub.c.SetReadDeadline(time.Now().Add(45 * time.Second))
	var said []string
	for len(said) == 0 || strings.HasPrefix(said[len(said)-1], "pending ") {
		raw, err := resp.ReadReply(sub.r)
		if err != nil {
			t.Fatalf("the outcome channel after %q: %v", said, err)
		}
		_, payload := messageFields(string(raw))
		said = append(said, payload)
	}
	if want := "confirmed " + ids[n+late]; said[len(said)-1] != want || len(said) > 2 {
		t.Errorf("the outcome channel said %q, want at most a pending, then %q", said, want)
	}
	if s.field("status_read_retries") == 0 {
		t.Error("no first read was tried again: the late buyers did not begin while the master was down")
	}
	t.Logf("woken by the stream %d, by the catch-up %d; first reads tried again %d", s.field("status_woken"), s.field("status_resynced"), s.field("status_read_retries"))
}

// TestOutcomeChannel: a buyer's outcome channel, served by the proxy: SUBSCRIBE answers the
// confirmation and the status now, then the outcome once the sink has stored the order, over
// RESP2 as subscriber mode's messages and over RESP3 as pushes between other replies; UNSUBSCRIBE
// ends it and, over RESP2, the connection is an ordinary one again; outcome channels and Redis's
// are held on connections of their own; PUBLISH on one is refused.
func TestOutcomeChannel(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 4)
	ctx := context.Background()
	sku := newSKU("chan")
	s.sale(t, c, sku, 5)
	ids := map[string]string{}
	for _, uid := range []string{"r2", "r3"} {
		id, err := c.Do(ctx, "seckill.buy", sku, uid).Text()
		if err != nil {
			t.Fatalf("%v\n%s", err, replicationState(t, s, sale.KeysFor(sku).Stock))
		}
		ids[uid] = id
	}
	bulk := func(v string) string { return "$" + strconv.Itoa(len(v)) + "\r\n" + v + "\r\n" }
	msg := func(head, ch, text string) string { return head + "3\r\n$7\r\nmessage\r\n" + bulk(ch) + bulk(text) }
	ch2, ch3, nobody := sale.OutcomeChannel(sku, "r2"), sale.OutcomeChannel(sku, "r3"), sale.OutcomeChannel(sku, "nobody")

	v2 := dialRaw(t, s.addr)
	if got, want := v2.do(t, "SUBSCRIBE", ch2), "*3\r\n$9\r\nsubscribe\r\n"+bulk(ch2)+":1\r\n"; got != want {
		t.Fatalf("SUBSCRIBE = %q, want %q", got, want)
	}
	if got, want := readMessage(t, v2), msg("*", ch2, "pending "+ids["r2"]); got != want {
		t.Fatalf("first message = %q, want %q", got, want)
	}
	if got, want := v2.do(t, "SUBSCRIBE", nobody), "*3\r\n$9\r\nsubscribe\r\n"+bulk(nobody)+":2\r\n"; got != want {
		t.Fatalf("second SUBSCRIBE = %q, want %q", got, want)
	}
	if got := readMessage(t, v2); got != msg("*", nobody, "none") {
		t.Fatalf("a buyer with no order: %q", got)
	}
	if got := v2.do(t, "PSUBSCRIBE", "news.*"); got != "-"+errOutcomeMixedText+"\r\n" {
		t.Fatalf("PSUBSCRIBE beside outcome channels = %q", got)
	}
	if got := v2.do(t, "GET", "x"); !strings.HasPrefix(got, "-ERR Can't execute 'get'") {
		t.Fatalf("GET while subscribed = %q", got)
	}

	v3 := dialRaw(t, s.addr)
	if got := v3.do(t, "HELLO", "3"); !strings.HasPrefix(got, "%7") {
		t.Fatalf("HELLO 3 = %q", got)
	}
	if got, want := v3.do(t, "SUBSCRIBE", ch3), ">3\r\n$9\r\nsubscribe\r\n"+bulk(ch3)+":1\r\n"; got != want {
		t.Fatalf("RESP3 SUBSCRIBE = %q, want %q", got, want)
	}
	if got, want := readMessage(t, v3), msg(">", ch3, "pending "+ids["r3"]); got != want {
		t.Fatalf("RESP3 first push = %q, want %q", got, want)
	}
	if got := v3.do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("RESP3 PING between the pushes = %q", got)
	}

	mixed := dialRaw(t, s.addr)
	mixed.do(t, "SUBSCRIBE", "news:"+sku)
	if got := mixed.do(t, "SUBSCRIBE", ch2); got != "-"+errOutcomeMixedText+"\r\n" {
		t.Fatalf("an outcome channel beside Redis's = %q", got)
	}
	if got := dialRaw(t, s.addr).do(t, "PUBLISH", ch2, "confirmed forged"); !strings.HasPrefix(got, "-NOPERM") {
		t.Fatalf("PUBLISH on an outcome channel = %q", got)
	}
	if got := dialRaw(t, s.addr).do(t, "SUBSCRIBE", sale.OutcomeChannelPrefix+"no-slash"); !strings.HasPrefix(got, "-ERR an outcome channel is") {
		t.Fatalf("a malformed outcome channel = %q", got)
	}

	// A RESP3 subscriber's command that blocks (BLPOP) does not hold its pushes back: the
	// outcome comes while it waits, and its reply after.
	blockKey := "blk:" + sku
	send(t, v3, "BLPOP", blockKey, "30")
	runSink(t, s.cfg)
	if got, want := readMessage(t, v2), msg("*", ch2, "confirmed "+ids["r2"]); got != want {
		t.Fatalf("the outcome = %q, want %q", got, want)
	}
	if got, want := readMessage(t, v3), msg(">", ch3, "confirmed "+ids["r3"]); got != want {
		t.Fatalf("the RESP3 outcome push while BLPOP waits = %q, want %q", got, want)
	}
	if err := c.Do(ctx, "lpush", blockKey, "x").Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := readMessage(t, v3), "*2\r\n"+bulk(blockKey)+bulk("x"); got != want {
		t.Fatalf("BLPOP's reply after the push = %q, want %q", got, want)
	}
	// UNSUBSCRIBE of every channel, in order, and an ordinary connection again.
	send(t, v2, "UNSUBSCRIBE")
	for _, want := range []string{"*3\r\n$11\r\nunsubscribe\r\n" + bulk(nobody) + ":1\r\n", "*3\r\n$11\r\nunsubscribe\r\n" + bulk(ch2) + ":0\r\n"} {
		if got := readMessage(t, v2); got != want {
			t.Fatalf("UNSUBSCRIBE reply = %q, want %q", got, want)
		}
	}
	if got := v2.do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after the last UNSUBSCRIBE = %q", got)
	}
	eventually(t, 5*time.Second, "no buyer waits", func() bool { return s.field("status_waiting") == 0 })
}

// pollClients polls SECKILL.STATUS <sku> u<i> once a second for each of n buyers, over 50
// connections (each second's polls of one connection pipelined), until every buyer's order is
// confirmed; then prints "polls <count>" and exits 0.
func pollClients(addr, sku string, n int) int {
	const conns = 50
	var polls atomic.Int64
	var wg sync.WaitGroup
	failed := atomic.Bool{}
	for c := range conns {
		wg.Go(func() {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				failed.Store(true)
				return
			}
			defer nc.Close()
			r := bufio.NewReader(nc)
			var left []string
			for i := c; i < n; i += conns {
				left = append(left, "u"+strconv.Itoa(i))
			}
			for len(left) > 0 {
				next := time.Now().Add(time.Second)
				var req []byte
				for _, uid := range left {
					req = fmt.Appendf(req, "*3\r\n$14\r\nSECKILL.STATUS\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(sku), sku, len(uid), uid)
				}
				if _, err := nc.Write(req); err != nil {
					failed.Store(true)
					return
				}
				var still []string
				for _, uid := range left {
					reply, err := resp.ReadReply(r)
					if err != nil {
						failed.Store(true)
						return
					}
					if !strings.Contains(string(reply), "confirmed ") {
						still = append(still, uid)
					}
				}
				polls.Add(int64(len(left)))
				left = still
				time.Sleep(time.Until(next))
			}
		})
	}
	wg.Wait()
	fmt.Printf("polls %d\n", polls.Load())
	if failed.Load() {
		return 1
	}
	return 0
}

// TestStatusWaitCatchUp: an outcome that reaches the result hash with no entry in the outcome
// stream (a sink older than the stream, an entry lost in a failover) still wakes its buyer:
// the catch-up reads the waiting orders' outcomes every status.resync.
func TestStatusWaitCatchUp(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Status.Resync = 200 * time.Millisecond })
	c := s.client(t, 2)
	ctx := context.Background()
	sku := newSKU("catchup")
	s.sale(t, c, sku, 2)
	id, err := c.Do(ctx, "seckill.buy", sku, "old").Text()
	if err != nil {
		t.Fatal(err)
	}
	wait := statusWait(t, s, sku, "old", "10000")
	eventually(t, 5*time.Second, "the buyer waits, its order found pending", func() bool { return s.field("status_waits") == 1 })
	// What an old sink writes: the result, and no stream entry.
	if err := s.rc.HSet(ctx, sale.KeysFor(sku).Result, id, "confirmed").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-wait:
		if got != "confirmed "+id {
			t.Fatalf("woken with %q, want confirmed %s", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the catch-up did not wake the buyer within 5 s (status.resync is 200 ms)")
	}
	if s.field("status_resynced") != 1 || s.field("status_woken") != 0 {
		t.Errorf("woken by the catch-up %d, by the stream %d; want 1 and 0", s.field("status_resynced"), s.field("status_woken"))
	}
}
