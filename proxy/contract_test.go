package proxy_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"

	"seckill-proxy/conf"
	"seckill-proxy/internal/resp"
	"seckill-proxy/internal/testenv"
)

// contractCase is a sequence of commands sent on one connection, one at a time; through the
// proxy each reply must be, byte for byte, the one redis-server gives. {k} in an argument is
// a hash tag of the run's own, so that every key of a case shares one slot.
type contractCase struct {
	name string
	cmds [][]string
	// resp3: the connection says HELLO 3 first (its reply, which names the server, is not
	// compared).
	resp3 bool
}

var contractCases = []contractCase{
	{name: "multi lrange ping exec", cmds: [][]string{
		{"RPUSH", "{k}l", "a", "b"}, {"MULTI"}, {"LRANGE", "{k}l", "0", "-1"}, {"PING"}, {"PING", "hi"}, {"EXEC"}}},
	{name: "multi echo select info", cmds: [][]string{
		{"MULTI"}, {"ECHO", "x"}, {"SELECT", "0"}, {"SET", "{k}a", "1"}, {"EXEC"}, {"GET", "{k}a"}}},
	{name: "blocking commands inside multi do not block", cmds: [][]string{
		{"RPUSH", "{k}l", "a"}, {"MULTI"}, {"BLPOP", "{k}l", "0"}, {"BLPOP", "{k}l", "0"}, {"BRPOP", "{k}l", "1"},
		{"BLMOVE", "{k}l", "{k}m", "LEFT", "RIGHT", "0"}, {"BZPOPMIN", "{k}z", "0"}, {"XREAD", "BLOCK", "0", "STREAMS", "{k}s", "$"}, {"EXEC"}}},
	{name: "keyless commands inside multi", cmds: [][]string{
		{"MULTI"}, {"DBSIZE"}, {"SCAN", "0"}, {"TIME"}, {"DISCARD"}}},
	{name: "an unknown command aborts the transaction", cmds: [][]string{
		{"MULTI"}, {"SET", "{k}a", "1"}, {"NOSUCHCOMMAND", "x"}, {"EXEC"}, {"EXISTS", "{k}a"}}},
	{name: "unknown commands' errors quote their arguments as Redis does", cmds: [][]string{
		{"MULTI"}, {strings.Repeat("N", 140), strings.Repeat("a", 100), "b\r\nc", strings.Repeat("d", 50), "e"},
		{"NOSUCH", "x\ny"}, {"NOSUCH"}, {"DISCARD"}}},
	{name: "a wrong arity aborts the transaction", cmds: [][]string{
		{"MULTI"}, {"GET"}, {"EXEC"}, {"PING"}}},
	{name: "errors at exec time are per command", cmds: [][]string{
		{"SET", "{k}a", "x"}, {"MULTI"}, {"INCR", "{k}a"}, {"SET", "{k}b", "2"}, {"EXEC"}, {"GET", "{k}b"}}},
	{name: "watch inside multi", cmds: [][]string{
		{"MULTI"}, {"WATCH", "{k}a"}, {"EXEC"}}},
	{name: "exec and discard without multi", cmds: [][]string{
		{"EXEC"}, {"DISCARD"}, {"MULTI"}, {"MULTI"}, {"DISCARD"}, {"PING"}}},
	{name: "command subcommands are Redis's", cmds: [][]string{
		{"COMMAND", "GETKEYS", "SET", "{k}a", "b"}, {"COMMAND", "INFO", "get", "nosuch"}, {"COMMAND", "DOCS", "get"},
		{"COMMAND", "LIST", "FILTERBY", "PATTERN", "xad*"}, {"COMMAND", "NOSUCH"}, {"COMMAND", "GETKEYS", "NOSUCH"}}},
	{name: "resp3 replies", resp3: true, cmds: [][]string{
		{"HSET", "{k}h", "f", "v", "g", "w"}, {"HGETALL", "{k}h"}, {"SADD", "{k}s", "a"}, {"SMEMBERS", "{k}s"},
		{"ZADD", "{k}z", "1.5", "m"}, {"ZSCORE", "{k}z", "m"}, {"ZRANGE", "{k}z", "0", "-1", "WITHSCORES"},
		{"GET", "{k}nope"}, {"MGET", "{k}nope", "{k}h"}, {"EXISTS", "{k}h"}, {"HRANDFIELD", "{k}nope"},
		{"BLPOP", "{k}nope", "0.01"}, {"XADD", "{k}x", "1-1", "f", "v"}, {"XRANGE", "{k}x", "-", "+"},
		{"MULTI"}, {"HGETALL", "{k}h"}, {"ZSCORE", "{k}z", "m"}, {"EXEC"}, {"PING"}, {"ECHO", "e"}}},
	{name: "resp3 back to resp2", resp3: true, cmds: [][]string{
		{"HSET", "{k}h", "f", "v"}, {"HGETALL", "{k}h"}, {"HELLO", "2"}, {"HGETALL", "{k}h"}, {"GET", "{k}nope"}}},
	{name: "a reply nested 100 deep, as Redis gives it", cmds: [][]string{
		{"EVAL", "local t = {1} for i = 1, 100 do t = {t} end return t", "0"}}},
	{name: "a reply nested 300 deep, on a key's node", cmds: [][]string{
		{"EVAL", "local t = {1} for i = 1, 300 do t = {t} end return t", "1", "{k}deep"}}},
	{name: "watch then a change aborts exec", cmds: [][]string{
		{"WATCH", "{k}a"}, {"SET", "{k}a", "1"}, {"MULTI"}, {"GET", "{k}a"}, {"EXEC"}}},
}

// TestRedisContract runs each case on redis-server directly and through the proxy (in front
// of the cluster, and of that same standalone server), and compares the replies.
func TestRedisContract(t *testing.T) { eachUpstream(t, testRedisContract) }

func testRedisContract(t *testing.T, s *stack) {
	direct := testenv.Standalone(t)
	for _, tc := range contractCases {
		t.Run(tc.name, func(t *testing.T) {
			want := runContract(t, direct, tc.cmds, tc.resp3)
			got := runContract(t, s.addr, tc.cmds, tc.resp3)
			for i := range tc.cmds {
				if tc.cmds[i][0] == "HELLO" {
					continue // names the server, its version and the connection's id
				}
				if got[i] != want[i] {
					t.Errorf("%s: proxy %q, redis %q", strings.Join(tc.cmds[i], " "), got[i], want[i])
				}
			}
		})
	}
}

// runContract sends cmds on a new connection to addr, with a hash tag of its own for {k},
// and returns each raw reply.
func runContract(t *testing.T, addr string, cmds [][]string, resp3 bool) []string {
	t.Helper()
	tag := "{c" + xid.New().String() + "}"
	c := dialRaw(t, addr)
	if resp3 {
		if got := c.do(t, "HELLO", "3"); !strings.HasPrefix(got, "%7\r\n$6\r\nserver\r\n") {
			t.Fatalf("HELLO 3 = %q", got)
		}
	}
	out := make([]string, len(cmds))
	for i, cmd := range cmds {
		args := make([]string, len(cmd))
		for j, a := range cmd {
			args[j] = strings.ReplaceAll(a, "{k}", tag)
		}
		out[i] = strings.ReplaceAll(c.do(t, args...), tag, "{k}")
	}
	return out
}

// TestAdminCommandsReachEveryMaster: what acts on a whole server goes to every master, and
// the reply says which failed. SCRIPT FLUSH leaves no master with the script (and the next
// keyless EVAL loads it on every master again); FLUSHALL,
// admin-allowed, is refused by the pass-through user's ACL on every master, and the reply
// names them; an admin may kill a runaway script without any admin_allow.
func TestAdminCommandsReachEveryMaster(t *testing.T) {
	users := []conf.User{{Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}, {Name: "shop", Password: "shop-pw", Role: conf.RoleApp}}
	s := start(t, func(c *conf.Config) {
		c.Users = users
		c.Redis.AdminAllow = []string{"script", "flushall"}
	})
	admin, app := dialRaw(t, s.addr), dialRaw(t, s.addr)
	if got := admin.do(t, "AUTH", "ops", "ops-pw"); got != "+OK\r\n" {
		t.Fatalf("AUTH ops = %q", got)
	}
	if got := app.do(t, "AUTH", "shop", "shop-pw"); got != "+OK\r\n" {
		t.Fatalf("AUTH shop = %q", got)
	}
	ctx := context.Background()
	direct := redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.cfg.Redis.Addrs})
	defer direct.Close()
	var count atomic.Int64
	_ = direct.ForEachMaster(ctx, func(context.Context, *redis.Client) error { count.Add(1); return nil })
	masters := int(count.Load())

	const body = "return 'contract'"
	sha := admin.do(t, "SCRIPT", "LOAD", body)
	if !strings.HasPrefix(sha, "$40\r\n") {
		t.Fatalf("SCRIPT LOAD = %q", sha)
	}
	sha = sha[5:45]
	exists := func() int {
		var n atomic.Int64
		_ = direct.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			if v, _ := m.ScriptExists(ctx, sha).Result(); len(v) == 1 && v[0] {
				n.Add(1)
			}
			return nil
		})
		return int(n.Load())
	}
	if n := exists(); n != masters {
		t.Fatalf("after SCRIPT LOAD %d of %d masters have the script", n, masters)
	}
	if got := admin.do(t, "SCRIPT", "FLUSH"); got != "+OK\r\n" {
		t.Fatalf("SCRIPT FLUSH = %q", got)
	}
	if n := exists(); n != 0 {
		t.Fatalf("after SCRIPT FLUSH %d of %d masters still have the script", n, masters)
	}
	// A keyless EVAL loads its script on every master, once: after a SCRIPT FLUSH through the
	// proxy, again (the proxy forgets what it loaded), so that its EVALSHA goes anywhere.
	for round := range 2 {
		if got := admin.do(t, "EVAL", body, "0"); got != "$8\r\ncontract\r\n" {
			t.Fatalf("round %d: keyless EVAL = %q", round, got)
		}
		if n := exists(); n != masters {
			t.Fatalf("round %d: after a keyless EVAL %d of %d masters have the script", round, n, masters)
		}
		if got := admin.do(t, "SCRIPT", "FLUSH"); got != "+OK\r\n" {
			t.Fatalf("round %d: SCRIPT FLUSH = %q", round, got)
		}
	}
	got := admin.do(t, "FLUSHALL")
	// Redis's own text, as one server gives it: the masters that refused go to the log.
	if !strings.HasPrefix(got, "-NOPERM") || strings.Contains(got, "failed on") || strings.Contains(got, "masters") {
		t.Fatalf("FLUSHALL = %q, want Redis's NOPERM as it wrote it", got)
	}
	for _, kill := range [][]string{{"SCRIPT", "KILL"}, {"FUNCTION", "KILL"}} {
		if got := admin.do(t, kill...); got != "-NOTBUSY No scripts in execution right now.\r\n" {
			t.Errorf("admin %v = %q", kill, got)
		}
		if got := app.do(t, kill...); !strings.Contains(got, "refused") {
			t.Errorf("app %v = %q, want refused", kill, got)
		}
	}
}

// TestCommandTableMerged: COMMAND COUNT, INFO and LIST are Redis's with the proxy's own
// SECKILL commands added.
func TestCommandTableMerged(t *testing.T) { eachUpstream(t, testCommandTableMerged) }

func testCommandTableMerged(t *testing.T, s *stack) {
	direct := dialRaw(t, testenv.Standalone(t))
	c := dialRaw(t, s.addr)
	const own = 10 // SECKILL.BUY, STATUS, INFO, WARM, CLOSE, RELEASE, CHECK, LIMIT, DENY, ALLOW
	var redisCount, proxyCount int
	if _, err := fmt.Sscanf(direct.do(t, "COMMAND", "COUNT"), ":%d", &redisCount); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscanf(c.do(t, "COMMAND", "COUNT"), ":%d", &proxyCount); err != nil {
		t.Fatal(err)
	}
	if proxyCount != redisCount+own {
		t.Errorf("COMMAND COUNT = %d, want Redis's %d + %d", proxyCount, redisCount, own)
	}
	want := direct.do(t, "COMMAND", "INFO", "get")
	got := c.do(t, "COMMAND", "INFO", "get", "seckill.buy")
	if !strings.HasPrefix(got, "*2\r\n"+strings.TrimPrefix(want, "*1\r\n")+"*10\r\n$11\r\nseckill.buy\r\n:-3\r\n") {
		t.Errorf("COMMAND INFO get seckill.buy = %q; Redis's get is %q", got, want)
	}
	if got := c.do(t, "COMMAND", "LIST"); !strings.Contains(got, "$11\r\nseckill.buy\r\n") || !strings.Contains(got, "$3\r\nget\r\n") {
		t.Errorf("COMMAND LIST lacks get or seckill.buy: %.200q", got)
	}
}

// TestInfoIsRedis: INFO is Redis's, merged over the masters in front of a cluster, with the
// proxy's own section after it; INFO seckill is the proxy's alone.
func TestInfoIsRedis(t *testing.T) { eachUpstream(t, testInfoIsRedis) }

func testInfoIsRedis(t *testing.T, s *stack) {
	c := dialRaw(t, s.addr)
	info := c.do(t, "INFO")
	for _, want := range []string{"# Server\r\n", "redis_version:", "# Clients\r\nconnected_clients:", "# Memory\r\nused_memory:",
		"# Persistence\r\nloading:0\r\n", "rdb_bgsave_in_progress:", "aof_rewrite_in_progress:", "# Keyspace\r\n",
		"# Seckill\r\nseckill_proxy:1\r\n", "proxy_connected_clients:", "proxy_total_commands_processed:"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q", want)
		}
	}
	// HELLO names the server INFO describes: the upstream's version and mode.
	field := func(name string) string {
		i := strings.Index(info, "\r\n"+name+":")
		if i < 0 {
			return ""
		}
		v := info[i+len(name)+3:]
		return v[:strings.Index(v, "\r\n")]
	}
	version, mode := field("redis_version"), field("redis_mode")
	hello := c.do(t, "HELLO", "3")
	if version == "" || mode == "" || !strings.Contains(hello, "$7\r\nversion\r\n$"+strconv.Itoa(len(version))+"\r\n"+version+"\r\n") ||
		!strings.Contains(hello, "$4\r\nmode\r\n$"+strconv.Itoa(len(mode))+"\r\n"+mode+"\r\n") {
		t.Errorf("HELLO 3 = %q, INFO says version %q mode %q", hello, version, mode)
	}
	c.do(t, "HELLO", "2")
	if own := c.do(t, "INFO", "seckill"); strings.Contains(own, "# Server") || !strings.Contains(own, "# Seckill\r\n") {
		t.Errorf("INFO seckill = %.300q", own)
	}
	if mem := c.do(t, "INFO", "memory"); strings.Contains(mem, "# Seckill") || !strings.Contains(mem, "used_memory:") {
		t.Errorf("INFO memory = %.300q", mem)
	}
	// The keyspace counts every master's keys: what DBSIZE (summed over the masters) counts. A
	// key of the test's own makes sure there is one, whichever tests ran before.
	key := newSKU("infokey")
	if got := c.do(t, "SET", key, "1", "EX", "60"); got != "+OK\r\n" {
		t.Fatalf("SET %s = %q", key, got)
	}
	eventually(t, 5*time.Second, "INFO keyspace's keys = DBSIZE", func() bool {
		var keys, dbsize int
		ks := c.do(t, "INFO", "keyspace")
		if i := strings.Index(ks, "db0:keys="); i >= 0 {
			_, _ = fmt.Sscanf(ks[i:], "db0:keys=%d", &keys)
		}
		_, _ = fmt.Sscanf(c.do(t, "DBSIZE"), ":%d", &dbsize)
		return keys == dbsize && keys > 0
	})
}

// TestClientCommands: CLIENT LIST, INFO and KILL answer for the proxy's own clients, in
// Redis's format; KILL is an admin's; what the proxy cannot honour says why.
func TestClientCommands(t *testing.T) {
	users := []conf.User{{Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}, {Name: "shop", Password: "shop-pw", Role: conf.RoleApp}}
	s := start(t, func(c *conf.Config) { c.Users = users })
	admin, app, victim := dialRaw(t, s.addr), dialRaw(t, s.addr), dialRaw(t, s.addr)
	for _, c := range []*rawClient{admin, app, victim} {
		user, pw := "shop", "shop-pw"
		if c == admin {
			user, pw = "ops", "ops-pw"
		}
		if got := c.do(t, "AUTH", user, pw); got != "+OK\r\n" {
			t.Fatalf("AUTH %s = %q", user, got)
		}
	}
	if got := victim.do(t, "CLIENT", "SETNAME", "victim"); got != "+OK\r\n" {
		t.Fatalf("SETNAME = %q", got)
	}
	victimID := strings.TrimSuffix(strings.TrimPrefix(victim.do(t, "CLIENT", "ID"), ":"), "\r\n")
	line := regexp.MustCompile(`^id=\d+ addr=127\.0\.0\.1:\d+ laddr=127\.0\.0\.1:\d+ fd=-?\d+ name=\S* age=\d+ idle=\d+ flags=[NPx]+ db=0 sub=0 psub=0 ssub=0 multi=-?\d+ qbuf=\d+ qbuf-free=0 argv-mem=\d+ multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=\d+ events=r cmd=\S+ user=\S+ redir=-1 resp=2 lib-name=\S* lib-ver=\S*$`)
	info := admin.do(t, "CLIENT", "INFO")
	if body := bulkBody(info); !line.MatchString(strings.TrimSuffix(body, "\n")) || !strings.Contains(body, "user=ops") || !strings.Contains(body, "cmd=client|info") {
		t.Fatalf("CLIENT INFO = %q", info)
	}
	list := bulkBody(admin.do(t, "CLIENT", "LIST"))
	lines := strings.Split(strings.TrimSuffix(list, "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(list, "id="+victimID+" ") || !strings.Contains(list, "name=victim ") {
		t.Fatalf("CLIENT LIST = %q", list)
	}
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Errorf("CLIENT LIST line %q is not in Redis's format", l)
		}
	}
	if got := bulkBody(admin.do(t, "CLIENT", "LIST", "ID", victimID)); strings.Count(got, "\n") != 1 || !strings.Contains(got, "name=victim") {
		t.Errorf("CLIENT LIST ID %s = %q", victimID, got)
	}
	// The fields the proxy knows are Redis's: the asking connection's query buffer holds its
	// own CLIENT LIST (qbuf=26 from redis-server 7.0), and a connection inside MULTI shows its
	// queued commands and flags=x.
	direct := dialRaw(t, testenv.Standalone(t))
	qbuf := regexp.MustCompile(` qbuf=\d+ `)
	want := qbuf.FindString(bulkBody(direct.do(t, "CLIENT", "INFO")))
	if got := qbuf.FindString(bulkBody(admin.do(t, "CLIENT", "INFO"))); got != want || want == "" {
		t.Errorf("CLIENT INFO's %q, redis-server's %q", got, want)
	}
	victim.do(t, "MULTI")
	victim.do(t, "GET", "{cl}a")
	victim.do(t, "PING")
	if got := bulkBody(admin.do(t, "CLIENT", "LIST", "ID", victimID)); !strings.Contains(got, " flags=x ") || !strings.Contains(got, " multi=2 ") {
		t.Errorf("CLIENT LIST of a client with 2 commands queued = %q", got)
	}
	victim.do(t, "DISCARD")
	if got := bulkBody(admin.do(t, "CLIENT", "LIST", "ID", victimID)); !strings.Contains(got, " flags=N ") || !strings.Contains(got, " multi=-1 ") {
		t.Errorf("CLIENT LIST after DISCARD = %q", got)
	}
	if got := app.do(t, "CLIENT", "LIST"); !strings.HasPrefix(got, "-NOPERM") {
		t.Errorf("app CLIENT LIST = %q, want NOPERM", got)
	}
	// A bare CLIENT KILL is an arity error, for anyone, as redis-server says.
	wantBare := direct.do(t, "CLIENT", "KILL")
	for _, c := range []*rawClient{admin, app} {
		if got := c.do(t, "CLIENT", "KILL"); got != wantBare || !strings.Contains(got, "wrong number of arguments") {
			t.Errorf("bare CLIENT KILL = %q, redis-server's %q", got, wantBare)
		}
	}
	if got := app.do(t, "CLIENT", "KILL", "ID", victimID); !strings.HasPrefix(got, "-NOPERM") {
		t.Errorf("app CLIENT KILL = %q, want NOPERM", got)
	}
	if got := admin.do(t, "CLIENT", "KILL", "ID", victimID); got != ":1\r\n" {
		t.Fatalf("admin CLIENT KILL ID = %q", got)
	}
	_ = victim.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := victim.r.ReadByte(); err == nil {
		t.Fatal("the killed client's connection is still open")
	}
	eventually(t, 5*time.Second, "the killed client leaves CLIENT LIST", func() bool {
		return !strings.Contains(admin.do(t, "CLIENT", "LIST"), "name=victim")
	})
	if got := admin.do(t, "CLIENT", "KILL", "127.0.0.1:1"); got != "-ERR No such client\r\n" {
		t.Errorf("CLIENT KILL of no one = %q", got)
	}
	if got := admin.do(t, "CLIENT", "KILL", "USER", "ops"); got != ":0\r\n" {
		t.Errorf("CLIENT KILL USER ops (SKIPME yes) = %q", got)
	}
	if got := admin.do(t, "CLIENT", "NO-EVICT", "on"); got != "+OK\r\n" {
		t.Errorf("CLIENT NO-EVICT on = %q", got)
	}
	if got := admin.do(t, "CLIENT", "PAUSE", "x"); got != "-ERR timeout is not an integer or out of range\r\n" {
		t.Errorf("CLIENT PAUSE x = %q, Redis's error", got)
	}
	for _, sub := range []string{"TRACKING", "NO-TOUCH"} {
		if got := admin.do(t, "CLIENT", sub, "x"); !strings.Contains(got, "not supported through seckill-proxy: ") {
			t.Errorf("CLIENT %s = %q", sub, got)
		}
	}
}

// bulkBody is a raw bulk string reply's content.
func bulkBody(raw string) string {
	_, body, _ := strings.Cut(raw, "\r\n")
	return strings.TrimSuffix(body, "\r\n")
}

// TestRESP3PubSub: after HELLO 3 a subscriber gets its messages as pushes on the connection
// it subscribed on, and may send any command between them.
func TestRESP3PubSub(t *testing.T) { eachUpstream(t, testRESP3PubSub) }

func testRESP3PubSub(t *testing.T, s *stack) {
	ch := "resp3ch:" + xid.New().String()
	key := "{r3" + xid.New().String() + "}"
	sub, pub := dialRaw(t, s.addr), dialRaw(t, s.addr)
	if got := sub.do(t, "HELLO", "3"); !strings.HasPrefix(got, "%7\r\n") || !strings.Contains(got, "$5\r\nproto\r\n:3\r\n") {
		t.Fatalf("HELLO 3 = %q", got)
	}
	push := func(kind, ch, last string) string {
		return fmt.Sprintf(">3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n%s", len(kind), kind, len(ch), ch, last)
	}
	if got := sub.do(t, "SUBSCRIBE", ch); got != push("subscribe", ch, ":1\r\n") {
		t.Fatalf("SUBSCRIBE = %q", got)
	}
	if got := sub.do(t, "SET", key, "v"); got != "+OK\r\n" {
		t.Fatalf("SET while subscribed = %q", got)
	}
	if got := sub.do(t, "HGETALL", key+"h"); got != "%0\r\n" {
		t.Fatalf("HGETALL while subscribed = %q", got)
	}
	// In a cluster a PUBLISH that reaches the subscriber through another node answers 0, and
	// is published again: the subscriber may get more than one message.
	message, messages := push("message", ch, "$2\r\nhi\r\n"), 0
	reply := func(args ...string) string {
		t.Helper()
		if _, err := sub.c.Write([]byte(respCmd(args...))); err != nil {
			t.Fatal(err)
		}
		for {
			_ = sub.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			got, err := resp.ReadReply(sub.r)
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			if string(got) != message {
				return string(got)
			}
			messages++
		}
	}
	eventually(t, 5*time.Second, "the publish reaches the subscriber", func() bool {
		return pub.do(t, "PUBLISH", ch, "hi") == ":1\r\n"
	})
	if got := reply("GET", key); got != "$1\r\nv\r\n" {
		t.Fatalf("GET between messages = %q after %d message pushes", got, messages)
	}
	// The push travels on the proxy's subscription connection and the GET on another, so the
	// GET's reply may overtake a message published just before it; the message still comes.
	for messages == 0 {
		_ = sub.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := resp.ReadReply(sub.r)
		if err != nil || string(got) != message {
			t.Fatalf("after GET: %q, %v; want the published message", got, err)
		}
		messages++
	}
	// A command that blocks (BLPOP) does not hold the pushes back: a message published while
	// it waits comes before its reply, as from Redis.
	if _, err := sub.c.Write([]byte(respCmd("BLPOP", key+"l", "30"))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a publish while BLPOP waits", func() bool {
		return pub.do(t, "PUBLISH", ch, "hi") == ":1\r\n"
	})
	_ = sub.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := resp.ReadReply(sub.r); err != nil || string(got) != message {
		t.Fatalf("while BLPOP waits: %q, %v; want the published message", got, err)
	}
	if got := pub.do(t, "LPUSH", key+"l", "x"); got != ":1\r\n" {
		t.Fatalf("LPUSH = %q", got)
	}
	for {
		_ = sub.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := resp.ReadReply(sub.r)
		if err != nil {
			t.Fatalf("BLPOP's reply: %v", err)
		}
		if string(got) == message { // a PUBLISH above that answered 0 was published again
			continue
		}
		if !strings.HasPrefix(string(got), "*2\r\n") || !strings.HasSuffix(string(got), "$1\r\nx\r\n") {
			t.Fatalf("BLPOP's reply after the message = %q", got)
		}
		break
	}
	// A switch to RESP2 while subscribed is refused: the subscription's pushes cannot turn
	// into RESP2 replies under way (the UNSUBSCRIBE's would come as a push).
	if got := reply("HELLO", "2"); !strings.HasPrefix(got, "-ERR HELLO 2 is refused in subscriber mode") {
		t.Fatalf("HELLO 2 while subscribed = %q, want a refusal", got)
	}
	if got := reply("UNSUBSCRIBE", ch); got != push("unsubscribe", ch, ":0\r\n") {
		t.Fatalf("UNSUBSCRIBE = %q", got)
	}
	if got := reply("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after = %q", got)
	}
}

// TestRESP3OwnReplies: the proxy's own replies take their RESP3 forms: SECKILL.WARM and
// SECKILL.INFO maps, INFO a verbatim string, a missing STATUS a RESP3 null.
func TestRESP3OwnReplies(t *testing.T) {
	s := start(t, nil)
	c := dialRaw(t, s.addr)
	if got := c.do(t, "HELLO", "3"); !strings.HasPrefix(got, "%7\r\n") {
		t.Fatalf("HELLO 3 = %q", got)
	}
	sku := newSKU("resp3")
	s.item(t, sku, 5)
	if got := c.do(t, "SECKILL.WARM", sku); !strings.HasPrefix(got, "%5\r\n$3\r\nsku\r\n") {
		t.Errorf("SECKILL.WARM = %q, want a map", got)
	}
	if got := c.do(t, "SECKILL.INFO", sku); !strings.HasPrefix(got, "%") {
		t.Errorf("SECKILL.INFO = %q, want a map", got)
	}
	if got := c.do(t, "INFO", "seckill"); !strings.HasPrefix(got, "=") || !strings.Contains(got, "\r\ntxt:# Seckill\r\n") {
		t.Errorf("INFO seckill = %.80q, want a verbatim string", got)
	}
	if got := c.do(t, "HELLO"); !strings.Contains(got, "$5\r\nproto\r\n:3\r\n") {
		t.Errorf("HELLO without a version = %q, want the protocol kept", got)
	}
}

// TestTransactionJudgedAsQueued: Redis judges each command of a transaction as it is queued,
// through the proxy as straight to redis-server. The reproduction: MULTI, GET, PING,
// then another client sets maxmemory 1, then EXEC: Redis answers the values, since they were
// queued before memory ran out (a proxy that held the queue until EXEC answered EXECABORT);
// and a command queued after memory ran out is refused with -OOM, and EXEC with EXECABORT.
func TestTransactionJudgedAsQueued(t *testing.T) { eachUpstream(t, testTransactionJudgedAsQueued) }

func testTransactionJudgedAsQueued(t *testing.T, s *stack) {
	ctx := context.Background()
	direct := testenv.Standalone(t)
	one := redis.NewClient(&redis.Options{Addr: direct})
	t.Cleanup(func() { _ = one.Close() })
	var cluster *redis.ClusterClient // the proxy's upstream, when it is not that one server
	if s.cfg.Redis.Mode != conf.ModeStandalone {
		cluster = redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.cfg.Redis.Addrs})
		t.Cleanup(func() { _ = cluster.Close() })
	}
	maxmemory := func(v string) {
		t.Helper()
		if err := one.ConfigSet(ctx, "maxmemory", v).Err(); err != nil {
			t.Fatal(err)
		}
		if cluster == nil {
			return
		}
		if err := cluster.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.ConfigSet(ctx, "maxmemory", v).Err()
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { maxmemory("0") })
	for _, tc := range []struct {
		name          string
		before, after [][]string // maxmemory 1 comes between them
	}{
		{"queued before memory ran out", [][]string{{"SET", "{k}x", "v"}, {"MULTI"}, {"GET", "{k}x"}, {"PING"}}, [][]string{{"EXEC"}}},
		{"queued after memory ran out", [][]string{{"MULTI"}, {"GET", "{k}x"}}, [][]string{{"SET", "{k}y", "1"}, {"PING"}, {"EXEC"}}},
		{"keyless first, then a key, then no memory", [][]string{{"MULTI"}, {"PING"}, {"ECHO", "e"}, {"INCR", "{k}n"}}, [][]string{{"EXEC"}}},
		{"discard after memory ran out", [][]string{{"MULTI"}, {"INCR", "{k}n"}}, [][]string{{"DISCARD"}, {"PING"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(addr string) []string {
				tag := "{c" + xid.New().String() + "}"
				c := dialRaw(t, addr)
				var out []string
				do := func(cmds [][]string) {
					for _, cmd := range cmds {
						args := make([]string, len(cmd))
						for j, a := range cmd {
							args[j] = strings.ReplaceAll(a, "{k}", tag)
						}
						out = append(out, c.do(t, args...))
					}
				}
				do(tc.before)
				maxmemory("1")
				do(tc.after)
				maxmemory("0")
				return out
			}
			want, got := run(direct), run(s.addr)
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("reply %d: proxy %q, redis %q", i, got[i], want[i])
				}
			}
		})
	}
}

// TestReset: RESET answers and resets as redis-server does (byte for byte, beside it): a
// transaction dropped (EXEC after it has no MULTI), the name gone, RESP2 again, a WATCH
// forgotten (a changed watched key no longer fails the next EXEC); and with users, the
// connection is the default user's again, which must log in.
func TestReset(t *testing.T) {
	eachUpstream(t, func(t *testing.T, s *stack) {
		proxy, direct := dialRaw(t, s.addr), dialRaw(t, testenv.Standalone(t))
		key := "reset:{r}" + newSKU("k")
		script := [][]string{
			{"HELLO", "3"}, {"CLIENT", "SETNAME", "before"}, {"MULTI"}, {"SET", key, "1"}, {"RESET"},
			{"EXEC"}, {"CLIENT", "GETNAME"}, {"PING"}, {"GET", key},
		}
		for _, cmd := range script {
			want, got := direct.do(t, cmd...), proxy.do(t, cmd...)
			if cmd[0] == "HELLO" {
				continue // the servers' own fields
			}
			if got != want {
				t.Errorf("%v = %q, redis-server's %q", cmd, got, want)
			}
		}
		other := s.client(t, 1)
		proxy.do(t, "WATCH", key)
		if err := other.Set(context.Background(), key, "2", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got := proxy.do(t, "RESET"); got != "+RESET\r\n" {
			t.Fatalf("RESET after WATCH = %q", got)
		}
		proxy.do(t, "MULTI")
		proxy.do(t, "SET", key, "3")
		if got := proxy.do(t, "EXEC"); got != "*1\r\n+OK\r\n" {
			t.Errorf("EXEC after RESET dropped the WATCH = %q, want it to run", got)
		}
	})
	s := start(t, func(c *conf.Config) {
		c.Users = []conf.User{{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}}
	})
	c := dialRaw(t, s.addr)
	if got := c.do(t, "AUTH", "shop", "shop-pw"); got != "+OK\r\n" {
		t.Fatalf("AUTH = %q", got)
	}
	if got := c.do(t, "RESET"); got != "+RESET\r\n" {
		t.Fatalf("RESET = %q", got)
	}
	if got := c.do(t, "GET", "x"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("GET after RESET = %q, want NOAUTH (the default user needs a password here)", got)
	}
	if got := c.do(t, "AUTH", "shop", "shop-pw"); got != "+OK\r\n" {
		t.Errorf("AUTH after RESET = %q", got)
	}
}

// TestClientReply: CLIENT REPLY OFF, SKIP and ON, served per connection as Redis serves them:
// no reply to OFF and SKIP themselves, none to the commands after OFF (pass-through, the
// proxy's own, a buy) though they run, none to the one command after SKIP, and OK to ON,
// which also clears a SKIP; in one pipeline or one command at a time, and bad arguments get
// Redis's errors.
func TestClientReply(t *testing.T) { eachUpstream(t, testClientReply) }

func testClientReply(t *testing.T, s *stack) {
	c := dialRaw(t, s.addr)
	key := "{reply" + xid.New().String() + "}"
	sku := newSKU("reply")
	s.sale(t, s.client(t, 1), sku, 5)
	pipeline := func(cmds ...[]string) {
		t.Helper()
		var b strings.Builder
		for _, cmd := range cmds {
			b.WriteString(respCmd(cmd...))
		}
		_ = c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.c.Write([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		t.Helper()
		_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		reply, err := resp.ReadReply(c.r)
		if err != nil {
			t.Fatal(err)
		}
		return string(reply)
	}
	for round, oneAtATime := range []bool{false, true} {
		u := "u" + strconv.Itoa(round)
		cmds := [][]string{
			{"CLIENT", "REPLY", "OFF"}, {"SET", key, "v" + u}, {"PING"}, {"ECHO", "x"}, {"SECKILL.BUY", sku, u},
			{"GET", key}, {"CLIENT", "REPLY", "SKIP"}, {"CLIENT", "REPLY", "ON"}, {"GET", key},
			{"CLIENT", "REPLY", "SKIP"}, {"PING", "skipped"}, {"PING", "seen"},
			{"CLIENT", "REPLY", "SKIP"}, {"CLIENT", "REPLY", "ON"}, {"PING"},
			{"SECKILL.STATUS", sku, u},
		}
		want := []string{"+OK\r\n", "$3\r\nv" + u + "\r\n", "$4\r\nseen\r\n", "+OK\r\n", "+PONG\r\n"}
		if oneAtATime {
			for _, cmd := range cmds {
				pipeline(cmd)
			}
		} else {
			pipeline(cmds...)
		}
		for i, w := range want {
			if got := read(); got != w {
				t.Fatalf("round %d: reply %d = %q, want %q", round, i, got, w)
			}
		}
		if got := read(); !strings.Contains(got, "pending ") {
			t.Errorf("round %d: SECKILL.STATUS after a muted buy = %q, want its order pending (no sink runs)", round, got)
		}
	}
	if got := c.do(t, "CLIENT", "REPLY", "MAYBE"); got != "-ERR syntax error\r\n" {
		t.Errorf("CLIENT REPLY MAYBE = %q", got)
	}
	if got := c.do(t, "CLIENT", "REPLY"); !strings.Contains(got, "wrong number of arguments") {
		t.Errorf("CLIENT REPLY = %q", got)
	}
}

// TestClientUnblock: CLIENT UNBLOCK <id> [TIMEOUT|ERROR] of a client of the proxy blocked in
// BLPOP ends its wait as Redis would, Redis answering the command itself: the timeout's reply
// (a null array) or -UNBLOCKED; nothing is popped, so an element pushed later stays. A client
// not blocked, or unknown, gets :0; bad arguments get Redis's errors; an app user is refused,
// as CLIENT KILL is.
func TestClientUnblock(t *testing.T) {
	users := []conf.User{{Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}, {Name: "shop", Password: "shop-pw", Role: conf.RoleApp}}
	eachUpstreamWith(t, func(c *conf.Config) { c.Users = users }, testClientUnblock)
}

func testClientUnblock(t *testing.T, s *stack) {
	login := func(user string) *rawClient {
		c := dialRaw(t, s.addr)
		if got := c.do(t, "AUTH", user, user+"-pw"); got != "+OK\r\n" {
			t.Fatalf("AUTH %s = %q", user, got)
		}
		return c
	}
	admin, app, blocked := login("ops"), login("shop"), login("shop")
	id := strings.TrimSuffix(strings.TrimPrefix(blocked.do(t, "CLIENT", "ID"), ":"), "\r\n")
	key := "{unblock" + xid.New().String() + "}"
	if got := admin.do(t, "CLIENT", "UNBLOCK", id); got != ":0\r\n" {
		t.Errorf("CLIENT UNBLOCK of a client not blocked = %q, want :0", got)
	}
	for _, c := range []struct{ mode, want string }{
		{"", "*-1\r\n"}, {"TIMEOUT", "*-1\r\n"}, {"error", "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"},
	} {
		send(t, blocked, "BLPOP", key, "0")
		args := []string{"CLIENT", "UNBLOCK", id}
		if c.mode != "" {
			args = append(args, c.mode)
		}
		eventually(t, 5*time.Second, "the BLPOP is unblocked", func() bool { return admin.do(t, args...) == ":1\r\n" })
		_ = blocked.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if got, err := resp.ReadReply(blocked.r); err != nil || string(got) != c.want {
			t.Fatalf("mode %q: the blocked BLPOP's reply = %q, %v; want %q", c.mode, got, err, c.want)
		}
	}
	if got := app.do(t, "RPUSH", key, "x"); got != ":1\r\n" {
		t.Fatalf("RPUSH = %q", got)
	}
	if got := app.do(t, "LLEN", key); got != ":1\r\n" {
		t.Errorf("LLEN after the unblocked BLPOPs = %q, want 1: nothing may be popped", got)
	}
	app.do(t, "DEL", key)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"CLIENT", "UNBLOCK", "999999999"}, ":0\r\n"},
		{[]string{"CLIENT", "UNBLOCK", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"CLIENT", "UNBLOCK", id, "LATER"}, "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"},
		{[]string{"CLIENT", "UNBLOCK"}, "-ERR wrong number of arguments for 'client|unblock' command\r\n"},
	} {
		if got := admin.do(t, c.args...); got != c.want {
			t.Errorf("%q = %q, want %q", c.args, got, c.want)
		}
	}
	if got := app.do(t, "CLIENT", "UNBLOCK", id); !strings.HasPrefix(got, "-NOPERM") {
		t.Errorf("an app user's CLIENT UNBLOCK = %q, want NOPERM", got)
	}
}
