package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"

	"seckill-proxy/conf"
	"seckill-proxy/internal/resp"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/upstream"
)

// rawClient sends commands and reads raw RESP replies, so that replies compare byte for byte.
type rawClient struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawClient{c: c, r: bufio.NewReader(c)}
}

func (rc *rawClient) do(t *testing.T, args ...string) string {
	t.Helper()
	rc.send(t, args...)
	return rc.reply(t)
}

// scripts are the differential tests' command scripts. {k} is replaced by a key prefix of the
// run's own, with one hash tag, so that every key of a script sits in one slot and the direct
// run can go to that slot's master.
var scripts = map[string][]string{
	"strings": {"SET {k}s hello", "GET {k}s", "GET {k}missing", "APPEND {k}s !", "STRLEN {k}s", "INCR {k}s",
		"SETNX {k}s x", "GETRANGE {k}s 0 2", "MSET {k}a 1 {k}b 2", "MGET {k}a {k}b {k}nope", "INCRBYFLOAT {k}a 1.5", "GETDEL {k}b"},
	"hashes": {"HSET {k}h f1 v1 f2 v2", "HGET {k}h f1", "HGET {k}h nope", "HGETALL {k}h", "HINCRBY {k}h n 5", "HDEL {k}h f1", "HLEN {k}h", "HMGET {k}h f2 nope"},
	"lists":  {"RPUSH {k}l a b c", "LRANGE {k}l 0 -1", "LPOP {k}l", "LPOP {k}l 5", "LPOP {k}l 2", "LRANGE {k}none 0 -1", "LINDEX {k}l 9"},
	"sets":   {"SADD {k}set 1 2 3", "SISMEMBER {k}set 2", "SCARD {k}set", "SREM {k}set 9", "SMISMEMBER {k}set 1 9"},
	"zsets":  {"ZADD {k}z 1 a 2 b", "ZRANGE {k}z 0 -1 WITHSCORES", "ZSCORE {k}z nope", "ZINCRBY {k}z 2.5 a", "ZRANK {k}z b"},
	"streams": {"XADD {k}x 1-1 f v", "XADD {k}x 2-1 g w", "XRANGE {k}x - +", "XLEN {k}x", "XADD {k}x 1-0 h u",
		"XREAD COUNT 1 STREAMS {k}x 0"},
	"hyperloglog": {"PFADD {k}hll a b c", "PFCOUNT {k}hll", "PFADD {k}hll a"},
	"bitmaps":     {"SETBIT {k}bits 7 1", "GETBIT {k}bits 7", "BITCOUNT {k}bits", "BITPOS {k}bits 1"},
	"geo":         {"GEOADD {k}geo 13.361389 38.115556 Palermo 15.087269 37.502669 Catania", "GEODIST {k}geo Palermo Catania km", "GEOPOS {k}geo Palermo nowhere"},
	"expiry":      {"SET {k}e v EX 100", "TTL {k}e", "PERSIST {k}e", "TTL {k}e", "TTL {k}nope", "EXPIRE {k}nope 5", "PEXPIRE {k}e 100000", "TYPE {k}e"},
	"scripting": {"EVAL return(1) 0", "EVAL return{1,'a',{false}} 0", "EVAL return(redis.status_reply('FINE')) 0",
		"EVAL return(redis.error_reply('MYERR custom')) 0", "EVAL return(redis.call('incr',KEYS[1])) 1 {k}n"},
	"errors":            {"SET {k}t x", "LPUSH {k}t y", "GET", "GET {k}t extra", "NOSUCHCOMMAND {k}t", "INCR {k}t", "HSET {k}t f"},
	"blocking":          {"BLPOP {k}empty 0.1", "RPUSH {k}q one", "BLPOP {k}q {k}empty 1", "BRPOP {k}empty 0.1"},
	"pubsub":            {"PUBLISH {k}ch hello"},
	"cross-slot atomic": {"MSETNX {k}a 1 {k}b 2", "RENAME {k}a {k}c", "GET {k}c"},
}

// TestDifferential runs each script against the owning master directly and through the proxy,
// from a clean state each time, and compares the replies as raw RESP.
func TestDifferential(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			prefix := "{d" + xid.New().String() + "}:"
			master, err := s.rc.MasterForKey(ctx, prefix)
			if err != nil {
				t.Fatal(err)
			}
			clean := func() {
				var mu sync.Mutex
				var keys []string
				if err := s.rc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
					found, err := m.Keys(ctx, prefix+"*").Result()
					mu.Lock()
					defer mu.Unlock()
					keys = append(keys, found...)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				if len(keys) > 0 {
					s.rc.Del(ctx, keys...)
				}
			}
			compareScript(t, script, prefix, master.Options().Addr, s.addr, clean)
		})
	}
}

// compareScript runs script from a clean state against Redis at direct and through the proxy
// at proxied, and reports every reply that differs as raw RESP.
func compareScript(t *testing.T, script []string, prefix, direct, proxied string, clean func()) {
	t.Helper()
	run := func(c *rawClient) []string {
		clean()
		var out []string
		for _, line := range script {
			out = append(out, c.do(t, strings.Fields(strings.ReplaceAll(line, "{k}", prefix))...))
		}
		return out
	}
	want, got := run(dialRaw(t, direct)), run(dialRaw(t, proxied))
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s:\n  redis %q\n  proxy %q", script[i], want[i], got[i])
		}
	}
}

// TestCrossSlotSplit: multi-key commands over several slots get the one reply Redis would
// give for keys in one slot.
func TestCrossSlotSplit(t *testing.T) {
	s := start(t, nil)
	c := dialRaw(t, s.addr)
	id := xid.New().String()
	keys := make([]string, 6)
	for i := range keys {
		keys[i] = "split:" + id + ":" + strconv.Itoa(i) // no hash tag: they spread over the slots
	}
	mset := []string{"MSET"}
	for i, k := range keys {
		mset = append(mset, k, "v"+strconv.Itoa(i))
	}
	if got := c.do(t, mset...); got != "+OK\r\n" {
		t.Fatalf("MSET = %q", got)
	}
	got := c.do(t, "MGET", keys[0], keys[1], "split:"+id+":none", keys[5])
	if got != "*4\r\n$2\r\nv0\r\n$2\r\nv1\r\n$-1\r\n$2\r\nv5\r\n" {
		t.Fatalf("MGET = %q", got)
	}
	if got := c.do(t, append([]string{"EXISTS"}, keys...)...); got != ":6\r\n" {
		t.Fatalf("EXISTS = %q", got)
	}
	if got := c.do(t, "DEL", keys[0], keys[1], keys[2]); got != ":3\r\n" {
		t.Fatalf("DEL = %q", got)
	}
	if got := c.do(t, "UNLINK", keys[3], keys[4], keys[5], keys[0]); got != ":3\r\n" {
		t.Fatalf("UNLINK = %q", got)
	}
	if got := c.do(t, "MSETNX", keys[0], "1", keys[1], "2"); Slot(keys[0]) != Slot(keys[1]) && got != "-CROSSSLOT Keys in request don't hash to the same slot\r\n" {
		t.Fatalf("MSETNX across slots = %q", got)
	}
}

// Slot is upstream.Slot, shortened for the tests.
func Slot(k string) uint16 { return upstream.Slot([]byte(k)) }

// TestRefusedAndKeyless: dangerous commands are refused, keyless ones answered across the
// masters.
func TestRefusedAndKeyless(t *testing.T) {
	s := start(t, nil)
	c := dialRaw(t, s.addr)
	for _, cmd := range [][]string{{"FLUSHALL"}, {"CONFIG", "GET", "maxmemory"}, {"DEBUG", "SLEEP", "0"}, {"SHUTDOWN"}, {"SCRIPT", "FLUSH"}} {
		if got := c.do(t, cmd...); !strings.HasPrefix(got, "-ERR ") || !strings.Contains(got, "refused by seckill-proxy") {
			t.Errorf("%v = %q, want a refusal", cmd, got)
		}
	}
	ctx := context.Background()
	var sizes atomic.Int64
	if err := s.rc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		sizes.Add(n)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	total := sizes.Load()
	got := c.do(t, "DBSIZE")
	n, _ := strconv.ParseInt(strings.TrimSpace(got[1:]), 10, 64)
	if got[0] != ':' || n < total-50 || n > total+50 {
		t.Fatalf("DBSIZE = %q, the masters hold about %d", got, total)
	}
	// SCAN walks every master and ends with cursor 0.
	id := xid.New().String()
	for i := range 20 {
		c.do(t, "SET", "scan:"+id+":"+strconv.Itoa(i), "x")
	}
	seen := map[string]bool{}
	cursor := "0"
	for range 10000 {
		reply := c.do(t, "SCAN", cursor, "MATCH", "scan:"+id+":*", "COUNT", "1000")
		parts := strings.Split(reply, "\r\n")
		cursor = parts[2]
		for _, p := range parts[4:] {
			if strings.HasPrefix(p, "scan:") {
				seen[p] = true
			}
		}
		if cursor == "0" {
			break
		}
	}
	if len(seen) != 20 || cursor != "0" {
		t.Fatalf("SCAN found %d of 20 keys, cursor %s", len(seen), cursor)
	}
}

// TestPassThroughWithGoRedis: go-redis as a plain client through the proxy, with pipelines.
func TestPassThroughWithGoRedis(t *testing.T) { eachUpstream(t, testPassThroughWithGoRedis) }

func testPassThroughWithGoRedis(t *testing.T, s *stack) {
	c := s.client(t, 4)
	ctx := context.Background()
	key := "gr:" + xid.New().String()
	pipe := c.Pipeline()
	set := pipe.Set(ctx, key, "v", time.Minute)
	get := pipe.Get(ctx, key)
	incr := pipe.Incr(ctx, key+":n")
	miss := pipe.Get(ctx, key+":none")
	hset := pipe.HSet(ctx, key+":h", "a", 1)
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	if set.Val() != "OK" || get.Val() != "v" || incr.Val() != 1 || miss.Err() != redis.Nil || hset.Val() != 1 {
		t.Fatalf("set %v get %v incr %v miss %v hset %v", set.Val(), get.Val(), incr.Val(), miss.Err(), hset.Val())
	}
	c.Del(ctx, key, key+":n", key+":h")
}

// TestStandaloneUpstream: with one plain Redis server as the upstream, the differential
// scripts match it byte for byte, cross-slot commands run as on any plain server, and the buy
// path works there too.
func TestStandaloneUpstream(t *testing.T) {
	addr := testenv.Standalone(t)
	s := startOn(t, addr, nil)
	ctx := context.Background()
	plain := redis.NewClient(&redis.Options{Addr: addr})
	defer plain.Close()
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			prefix := "{s" + xid.New().String() + "}:"
			compareScript(t, script, prefix, addr, s.addr, func() {
				if keys := plain.Keys(ctx, prefix+"*").Val(); len(keys) > 0 {
					plain.Del(ctx, keys...)
				}
			})
		})
	}
	c := dialRaw(t, s.addr)
	id := xid.New().String()
	if got := c.do(t, "MSETNX", "a"+id, "1", "b"+id, "2"); got != ":1\r\n" {
		t.Fatalf("MSETNX on a plain server = %q", got)
	}
	plain.Del(ctx, "a"+id, "b"+id)
	gc := s.client(t, 2)
	sku := newSKU("standalone")
	s.sale(t, gc, sku, 1)
	if err := gc.Do(ctx, "seckill.buy", sku, "u1").Err(); err != nil {
		t.Fatalf("BUY on a standalone upstream: %v", err)
	}
	if err := gc.Do(ctx, "seckill.buy", sku, "u2").Err(); code(err) != "SOLDOUT" {
		t.Fatalf("second BUY: %v", err)
	}
}

// TestTransactions: MULTI/EXEC runs atomically on the master of its slot, WATCH holds a
// connection of the client's own, and a transaction over two slots is refused as Redis would.
func TestTransactions(t *testing.T) {
	s := start(t, nil)
	c, other := dialRaw(t, s.addr), dialRaw(t, s.addr)
	k := "{tx" + xid.New().String() + "}:"
	steps := []struct{ cmd, want string }{
		{"EXEC", "-ERR EXEC without MULTI\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SET " + k + "a 1", "+QUEUED\r\n"},
		{"INCR " + k + "a", "+QUEUED\r\n"},
		{"GET " + k + "a", "+QUEUED\r\n"},
		{"EXEC", "*3\r\n+OK\r\n:2\r\n$1\r\n2\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SET " + k + "a 1", "+QUEUED\r\n"},
		{"SET other:" + xid.New().String() + " 2", "-CROSSSLOT Keys in request don't hash to the same slot (a transaction runs atomically on one Redis node: give its keys one hash tag, such as {order42}, so that they share a slot)\r\n"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SECKILL.STATUS sku u", "-ERR 'seckill.status' is not allowed inside MULTI through seckill-proxy\r\n"},
		{"DISCARD", "+OK\r\n"},
		{"WATCH " + k + "w", "+OK\r\n"},
	}
	for _, st := range steps {
		if got := c.do(t, strings.Fields(st.cmd)...); got != st.want {
			t.Fatalf("%s = %q, want %q", st.cmd, got, st.want)
		}
	}
	other.do(t, "SET", k+"w", "changed")
	for _, st := range []struct{ cmd, want string }{
		{"MULTI", "+OK\r\n"},
		{"SET " + k + "w mine", "+QUEUED\r\n"},
		{"EXEC", "*-1\r\n"}, // the watched key changed: nothing ran
		{"GET " + k + "w", "$7\r\nchanged\r\n"},
	} {
		if got := c.do(t, strings.Fields(st.cmd)...); got != st.want {
			t.Fatalf("%s = %q, want %q", st.cmd, got, st.want)
		}
	}
	s.rc.Del(context.Background(), k+"a", k+"w")
}

// TestUpstreamDownAndBack: with the upstream server gone, a command fails fast with
// UNAVAILABLE; when it is back, the proxy reconnects by itself.
func TestUpstreamDownAndBack(t *testing.T) {
	addr, startRedis := ownRedis(t)
	server := startRedis()
	s := startOn(t, addr, func(c *conf.Config) { c.Redis.CommandTimeout = 500 * time.Millisecond })
	c := dialRaw(t, s.addr)
	if got := c.do(t, "SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	_ = server.Process.Kill()
	_ = server.Wait()
	t0 := time.Now()
	if got := c.do(t, "GET", "k"); !strings.HasPrefix(got, "-UNAVAILABLE ") {
		t.Fatalf("GET with the upstream down = %q", got)
	}
	if took := time.Since(t0); took > 3*time.Second {
		t.Fatalf("UNAVAILABLE took %v", took)
	}
	startRedis()
	eventually(t, 10*time.Second, "the proxy reconnects", func() bool { return c.do(t, "PING", "x") == "$1\r\nx\r\n" && c.do(t, "SET", "k", "w") == "+OK\r\n" })
}

// TestRedisCLI uses redis-cli, as an operator would, for plain commands through the proxy.
func TestRedisCLI(t *testing.T) { eachUpstream(t, testRedisCLI) }

func testRedisCLI(t *testing.T, s *stack) {
	host, port, _ := net.SplitHostPort(s.addr)
	key := "cli:" + xid.New().String()
	run := func(args ...string) string {
		out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("SET", key, "hello"); got != "OK" {
		t.Fatalf("SET = %q", got)
	}
	if got := run("GET", key); got != "hello" {
		t.Fatalf("GET = %q", got)
	}
	if got := run("DEL", key); got != "1" {
		t.Fatalf("DEL = %q", got)
	}
}

// TestSubscriberMode: SUBSCRIBE switches the connection to subscriber mode as Redis does;
// messages published through another client arrive raw.
func TestSubscriberMode(t *testing.T) { eachUpstream(t, testSubscriberMode) }

func testSubscriberMode(t *testing.T, s *stack) {
	sub, pub := dialRaw(t, s.addr), dialRaw(t, s.addr)
	ch := "ch:" + xid.New().String()
	if got := sub.do(t, "SUBSCRIBE", ch); got != fmt.Sprintf("*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n", len(ch), ch) {
		t.Fatalf("SUBSCRIBE = %q", got)
	}
	if got := pub.do(t, "PUBLISH", ch, "hello"); got != ":1\r\n" {
		t.Fatalf("PUBLISH = %q", got)
	}
	if got, err := resp.ReadReply(sub.r); err != nil || string(got) != fmt.Sprintf("*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$5\r\nhello\r\n", len(ch), ch) {
		t.Fatalf("message = %q, %v", got, err)
	}
	if got := sub.do(t, "GET", "x"); got != "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n" {
		t.Fatalf("GET in subscriber mode = %q", got)
	}
	if got := sub.do(t, "PING"); got != "*2\r\n$4\r\npong\r\n$0\r\n\r\n" {
		t.Fatalf("PING in subscriber mode = %q", got)
	}
	if got := sub.do(t, "UNSUBSCRIBE", ch); got != fmt.Sprintf("*3\r\n$11\r\nunsubscribe\r\n$%d\r\n%s\r\n:0\r\n", len(ch), ch) {
		t.Fatalf("UNSUBSCRIBE = %q", got)
	}
	// With no subscription left, the client is an ordinary one again, as in Redis.
	key := "sub:" + xid.New().String()
	if got := sub.do(t, "SET", key, "v"); got != "+OK\r\n" {
		t.Fatalf("SET after the last UNSUBSCRIBE = %q", got)
	}
	if got := sub.do(t, "GET", key); got != "$1\r\nv\r\n" {
		t.Fatalf("GET after the last UNSUBSCRIBE = %q", got)
	}
	if got := sub.do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING out of subscriber mode = %q", got)
	}
	// It may subscribe again, and leave again within one pipeline: each command is answered
	// once, in order.
	if got := sub.do(t, "SUBSCRIBE", ch); !strings.HasPrefix(got, "*3\r\n$9\r\nsubscribe\r\n") {
		t.Fatalf("SUBSCRIBE again = %q", got)
	}
	pipeline := fmt.Sprintf("*2\r\n$11\r\nUNSUBSCRIBE\r\n$%d\r\n%s\r\n*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n*1\r\n$4\r\nPING\r\n",
		len(ch), ch, len(key), key)
	if _, err := sub.c.Write([]byte(pipeline)); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{
		fmt.Sprintf("*3\r\n$11\r\nunsubscribe\r\n$%d\r\n%s\r\n:0\r\n", len(ch), ch),
		"$1\r\nv\r\n",
		"+PONG\r\n",
	} {
		if got, err := resp.ReadReply(sub.r); err != nil || string(got) != want {
			t.Fatalf("pipelined reply %d = %q, %v; want %q", i, got, err, want)
		}
	}
	if got := sub.do(t, "QUIT"); got != "+OK\r\n" {
		t.Fatalf("QUIT = %q", got)
	}

	// The same, all in the read that starts subscriber mode.
	c := dialRaw(t, s.addr)
	if _, err := c.c.Write([]byte(fmt.Sprintf("*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n", len(ch), ch) + pipeline)); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{
		fmt.Sprintf("*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n", len(ch), ch),
		fmt.Sprintf("*3\r\n$11\r\nunsubscribe\r\n$%d\r\n%s\r\n:0\r\n", len(ch), ch),
		"$1\r\nv\r\n",
		"+PONG\r\n",
	} {
		if got, err := resp.ReadReply(c.r); err != nil || string(got) != want {
			t.Fatalf("one-read reply %d = %q, %v; want %q", i, got, err, want)
		}
	}
}
