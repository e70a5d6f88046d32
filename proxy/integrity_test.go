package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/sale"
)

// writeAttempts are the ways a client may try to write a key K, with decoys in K's slot:
// D a string, L a list, Z a sorted set, G a geo set and H a HyperLogLog, each made anew
// before every attempt. Each step is one command; a step of several commands is a
// transaction or a script loaded first.
var writeAttempts = map[string][][]string{
	"set":                {{"SET", "K", "9"}},
	"del":                {{"DEL", "K"}},
	"unlink":             {{"UNLINK", "K"}},
	"expire":             {{"EXPIRE", "K", "100"}},
	"incrby":             {{"INCRBY", "K", "7"}},
	"hset":               {{"HSET", "K", "state", "closed"}},
	"hdel":               {{"HDEL", "K", "state"}},
	"xadd":               {{"XADD", "K", "*", "order", "forged", "qty", "7", "uid", "u9"}},
	"sadd":               {{"SADD", "K", "forged"}},
	"rename to":          {{"RENAME", "D", "K"}},
	"rename from":        {{"RENAME", "K", "D"}},
	"copy":               {{"COPY", "D", "K", "REPLACE"}},
	"move":               {{"MOVE", "K", "1"}},
	"restore":            {{"RESTORE", "K", "0", "DUMP(D)", "REPLACE"}},
	"sort store":         {{"SORT", "L", "ALPHA", "STORE", "K"}},
	"sunionstore":        {{"SUNIONSTORE", "K", "Z"}},
	"zunionstore":        {{"ZUNIONSTORE", "K", "1", "Z"}},
	"bitop":              {{"BITOP", "OR", "K", "D"}},
	"pfmerge":            {{"PFMERGE", "K", "H"}},
	"lmove":              {{"LMOVE", "L", "K", "LEFT", "RIGHT"}},
	"georadius store":    {{"GEORADIUS", "G", "13", "38", "500", "km", "STORE", "K"}},
	"georadiusbymember":  {{"GEORADIUSBYMEMBER", "G", "Palermo", "500", "km", "STOREDIST", "K"}},
	"geosearchstore":     {{"GEOSEARCHSTORE", "K", "G", "FROMLONLAT", "13", "38", "BYRADIUS", "500", "km"}},
	"xgroup create":      {{"XGROUP", "CREATE", "K", "g", "$", "MKSTREAM"}},
	"xgroup setid":       {{"XGROUP", "SETID", "K", "g", "0"}},
	"eval declared":      {{"EVAL", "return redis.call('set', KEYS[1], '9')", "1", "K"}},
	"eval decoy":         {{"EVAL", "return redis.call('set', ARGV[1], '9')", "1", "D", "K"}},
	"eval no keys":       {{"EVAL", "return redis.call('del', ARGV[1])", "0", "K"}},
	"eval flushall":      {{"EVAL", "return redis.call('flushall')", "0"}},
	"eval_ro":            {{"EVAL_RO", "return redis.call('del', KEYS[1])", "1", "K"}},
	"evalsha":            {{"SCRIPT", "LOAD", "return redis.call('set', ARGV[1], '9')"}, {"EVALSHA", "SHA", "1", "D", "K"}},
	"function and fcall": {{"FUNCTION", "LOAD", "REPLACE", "#!lua name=forge\nredis.register_function('forge', function(k, a) return redis.call('set', a[1], '9') end)"}, {"FCALL", "forge", "1", "D", "K"}},
	"multi set":          {{"MULTI"}, {"SET", "K", "9"}, {"EXEC"}},
	"multi eval":         {{"MULTI"}, {"EVAL", "return redis.call('set', ARGV[1], '9')", "1", "D", "K"}, {"EXEC"}},
	"flushall":           {{"FLUSHALL"}},
	"flushdb":            {{"FLUSHDB"}},
}

// refusal is how a refusal reads, from the proxy's policy or from Redis's ACL.
func refusal(reply string) bool {
	for _, s := range []string{"NOPERM", "NOAUTH", "EXECABORT", "no permissions", "can't access", "can't run", "can't publish", "is refused", "Write commands are not allowed"} {
		if strings.Contains(reply, s) {
			return true
		}
	}
	return false
}

// TestSaleKeysCannotBeWritten: whatever a client sends, with no login, as app or as admin (even
// with the dangerous commands admin-allowed), a sale's stock, meta, buyers, outbox and result,
// and the set of sales, are unchanged afterwards, read back directly from Redis.
func TestSaleKeysCannotBeWritten(t *testing.T) {
	allow := func(c *conf.Config) {
		c.Redis.AdminAllow = []string{"flushall", "flushdb", "move", "function", "script"}
	}
	withUsers := func(c *conf.Config) {
		allow(c)
		c.Users = []conf.User{{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}, {Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}}
	}
	t.Run("cluster", func(t *testing.T) {
		testSaleKeysCannotBeWritten(t, startProxy(t, newConfig(t, allow), false), startProxy(t, newConfig(t, withUsers), false))
	})
	t.Run("standalone", func(t *testing.T) {
		onStandalone := func(m func(*conf.Config)) func(*conf.Config) {
			return func(c *conf.Config) {
				c.Redis.Mode, c.Redis.Addrs = conf.ModeStandalone, []string{"127.0.0.1:7010"}
				c.Buy.NoReplica = conf.NoReplicaTell // no tee, and a server with no replica: the sale's buys are told at once
				m(c)
			}
		}
		testSaleKeysCannotBeWritten(t, startProxy(t, newConfig(t, onStandalone(allow)), false),
			startProxy(t, newConfig(t, onStandalone(withUsers)), false))
	})
}

func testSaleKeysCannotBeWritten(t *testing.T, open, locked *stack) {
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: open.addr})
	defer admin.Close()
	sku := newSKU("integrity")
	open.sale(t, admin, sku, 100, "LIMIT", "2")
	for _, uid := range []string{"u1", "u2"} {
		if err := admin.Do(ctx, "seckill.buy", sku, uid).Err(); err != nil {
			t.Fatal(err)
		}
	}
	k := sale.KeysFor(sku)
	rc := open.rc
	if err := rc.HSet(ctx, k.Result, "some-order", "confirmed").Err(); err != nil { // as the sink writes it
		t.Fatal(err)
	}
	targets := []string{k.Stock, k.Meta, k.Buyers, k.Outbox, k.Result, sale.SalesKey}
	// snapshot is every target's value and expiry. A read that fails (a node an earlier test
	// restarted, not yet reached again) is tried again for a while, then fails the test by
	// name: a failed read must never look like a change, nor hide one.
	snapshot := func() string {
		t.Helper()
		var b strings.Builder
		for _, key := range targets {
			var d string
			var ttl time.Duration
			var err error
			for deadline := time.Now().Add(10 * time.Second); ; {
				if d, err = rc.Dump(ctx, key).Result(); err == redis.Nil {
					d, err = "", nil
				}
				if err == nil {
					ttl, err = rc.PTTL(ctx, key).Result()
				}
				if err == nil || time.Now().After(deadline) {
					break
				}
				rc.ReloadState(ctx) // go-redis does not reload its slot map on "connection refused"
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("reading %s for the sale's snapshot: %v", key, err)
			}
			b.WriteString(key + "=" + d + "/" + ttl.String() + ";")
		}
		return b.String()
	}
	want := snapshot()
	if !strings.Contains(want, "stock=") || rc.XLen(ctx, k.Outbox).Val() != 2 {
		t.Fatalf("the sale is not set up: %q", want)
	}
	decoys := map[string]string{"D": "decoy:{" + sku + "}", "L": "decoy:{" + sku + "}:l", "Z": "decoy:{" + sku + "}:z",
		"G": "decoy:{" + sku + "}:g", "H": "decoy:{" + sku + "}:h"}
	resetDecoys := func() string {
		pipe := rc.TxPipeline()
		for _, d := range decoys {
			pipe.Del(ctx, d)
		}
		pipe.Set(ctx, decoys["D"], "1", 0)
		pipe.RPush(ctx, decoys["L"], "b", "a")
		pipe.ZAdd(ctx, decoys["Z"], redis.Z{Score: 1, Member: "m"})
		pipe.GeoAdd(ctx, decoys["G"], &redis.GeoLocation{Name: "Palermo", Longitude: 13.361389, Latitude: 38.115556})
		pipe.PFAdd(ctx, decoys["H"], "a")
		dump := pipe.Dump(ctx, decoys["D"])
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		return dump.Val()
	}
	defer func() {
		for _, d := range decoys {
			rc.Del(ctx, d)
		}
	}()
	roles := []struct {
		name       string
		addr, auth string
	}{
		{"no login, open proxy", open.addr, ""},
		{"no login", locked.addr, ""},
		{"app", locked.addr, "shop shop-pw"},
		{"admin", locked.addr, "ops ops-pw"},
	}
	for _, role := range roles {
		for name, steps := range writeAttempts {
			for _, target := range targets {
				dump := resetDecoys()
				c := dialRaw(t, role.addr)
				if role.auth != "" {
					user, pw, _ := strings.Cut(role.auth, " ")
					if got := c.do(t, "AUTH", user, pw); got != "+OK\r\n" {
						t.Fatalf("AUTH %s: %q", user, got)
					}
				}
				var transcript []string
				sha := ""
				for _, step := range steps {
					args := make([]string, len(step))
					for i, a := range step {
						switch {
						case a == "K":
							a = target
						case a == "SHA":
							a = sha
						case a == "DUMP(D)":
							a = dump
						case decoys[a] != "":
							a = decoys[a]
						}
						args[i] = a
					}
					reply := c.do(t, args...)
					if step[0] == "SCRIPT" && strings.HasPrefix(reply, "$") {
						sha = strings.Split(reply, "\r\n")[1]
					}
					transcript = append(transcript, reply)
				}
				if got := snapshot(); got != want {
					t.Errorf("%s, %s on %s changed the sale's keys (replies %q): %s", role.name, name, target, transcript, changedKeys(want, got))
					return
				}
				if all := strings.Join(transcript, " "); !refusal(all) {
					t.Errorf("%s, %s on %s: replies %q, want a refusal", role.name, name, target, transcript)
				}
			}
		}
	}
}

// changedKeys names the keys whose part of two snapshots differs, with both.
func changedKeys(want, got string) string {
	w, g := strings.Split(want, ";"), strings.Split(got, ";")
	var out []string
	for i := range max(len(w), len(g)) {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			out = append(out, fmt.Sprintf("was %q, now %q", a, b))
		}
	}
	return strings.Join(out, "; ")
}

// TestForgedEventsChangeNothing: close, soldout and release events published on Redis
// directly, as anyone with access to Redis could, change no proxy's answers: a proxy believes
// only what the sale in Redis says.
func TestForgedEventsChangeNothing(t *testing.T) {
	s := start(t, func(c *conf.Config) { c.Buy.SoldOutReprobe = time.Hour })
	c := s.client(t, 1)
	ctx := context.Background()
	sku := newSKU("forged")
	s.sale(t, c, sku, 2)
	forge := func(events ...string) {
		t.Helper()
		heard := s.g.Stats().Events
		for _, e := range events {
			if err := s.rc.Publish(ctx, sale.EventsChannel, e+" "+sku+" forger").Err(); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 5*time.Second, "the proxy hears the forged events", func() bool {
			return s.g.Stats().Events >= heard+int64(len(events))
		})
	}
	// Through the proxy, no client may publish on the channel at all, nor from a script.
	raw := dialRaw(t, s.addr)
	for _, cmd := range [][]string{
		{"PUBLISH", sale.EventsChannel, "close " + sku + " forger"},
		{"SPUBLISH", sale.EventsChannel, "close " + sku + " forger"},
		{"EVAL", "return redis.call('publish', ARGV[1], ARGV[2])", "0", sale.EventsChannel, "close " + sku + " forger"},
	} {
		if got := raw.do(t, cmd...); !refusal(got) {
			t.Fatalf("%s on the events channel through the proxy: %q, want a refusal", cmd[0], got)
		}
	}
	forge("close", "soldout")
	u1, err := c.Do(ctx, "seckill.buy", sku, "u1").Text()
	if err != nil {
		t.Fatalf("a buy after a forged close and soldout: %v, want an order", err)
	}
	if flag := infoMap(t, c.Do(ctx, "seckill.info", sku).Val())["local_flag"]; flag != "none" {
		t.Fatalf("local_flag = %q after forged events, want none", flag)
	}
	if err := c.Do(ctx, "seckill.buy", sku, "u2").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the sold-out flag", func() bool {
		flagged, _, _ := s.g.Flags().Get(sku, time.Now())
		return flagged
	})
	forge("release")
	if err := c.Do(ctx, "seckill.buy", sku, "u3").Err(); code(err) != "SOLDOUT" {
		t.Fatalf("a buy after a forged release: %v, want SOLDOUT", err)
	}
	if err := c.Do(ctx, "seckill.buy", sku, "u1").Err(); err == nil || err.Error() != "DUPLICATE "+u1 {
		t.Fatalf("u1 again: %v, want DUPLICATE %s", err, u1)
	}
	if st := s.g.Stats(); st.EventsIgnored < 2 {
		t.Fatalf("%d events ignored, want the forged close and soldout", st.EventsIgnored)
	}
}
