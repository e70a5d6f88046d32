package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/schema"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/sink"
)

// TestTLSEverywhere: a proxy whose every hop is TLS, as on a cloud of managed services: Redis
// over its TLS port with a client certificate, Kafka over SASL_SSL with SCRAM-SHA-512, a sink
// writing MySQL as a user that may log in over TLS only, and clients on tls_listen. A buyer
// over TLS buys, pass-through, a transaction, a subscriber and a blocking read work, the cluster facade gives a TLS client
// the TLS port and a plaintext one the plaintext port, redis-cli --tls with its certificate
// gets in (tls.client_ca_file: mutual TLS), and the order reaches MySQL; a client that does
// not speak TLS to tls_listen, or shows no certificate, gets nothing.
func TestTLSEverywhere(t *testing.T) {
	dir := testenv.TLS(t)
	file := func(n string) string { return filepath.Join(dir, n) }
	cfg := newConfig(t, nil) // its topics are deleted over the plaintext listener
	cfg.Redis.Mode, cfg.Redis.Addrs = conf.ModeStandalone, []string{testenv.RedisTLSAddr}
	cfg.Redis.TLS = conf.TLS{Enabled: true, CAFile: file("ca.pem"), CertFile: file("client.pem"), KeyFile: file("client.key")}
	cfg.Kafka.Brokers = []string{testenv.KafkaSASLSSL}
	cfg.Kafka.TLS = conf.TLS{Enabled: true, CAFile: file("ca.pem")}
	cfg.Kafka.SASL = conf.SASL{Mechanism: conf.SASLSCRAM512, Username: testenv.KafkaSASLUser, Password: testenv.KafkaSASLPassword}
	dsn, err := mysql.ParseDSN(cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	dsn.User, dsn.Passwd = testenv.MySQLTLSUser, testenv.MySQLTLSPassword
	cfg.MySQL.DSN, cfg.MySQL.TLS = dsn.FormatDSN(), conf.TLS{Enabled: true, CAFile: file("ca.pem")}
	cfg.TLSListen, cfg.TLS = "127.0.0.1:0", conf.ServerTLS{CertFile: file("server.pem"), KeyFile: file("server.key"), ClientCAFile: file("ca.pem")}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := startProxy(t, cfg, true)
	if s.tlsAddr == "" {
		t.Fatal("no TLS listener")
	}

	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(file("ca.pem"))
	pool.AppendCertsFromPEM(ca)
	ctx := context.Background()
	mine, err := tls.LoadX509KeyPair(file("client.pem"), file("client.key"))
	if err != nil {
		t.Fatal(err)
	}
	tc := redis.NewClient(&redis.Options{Addr: s.tlsAddr, TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{mine}}, ReadTimeout: 5 * time.Second})
	defer tc.Close()
	plain := s.client(t, 2)
	sku := newSKU("tls")
	s.sale(t, plain, sku, 3)
	id, err := tc.Do(ctx, "seckill.buy", sku, "tls-buyer").Text()
	if err != nil || id == "" {
		t.Fatalf("a buy over TLS: %q, %v", id, err)
	}
	if id2, err := plain.Do(ctx, "seckill.buy", sku, "plain-buyer").Text(); err != nil || id2 == "" || id2 == id {
		t.Fatalf("a buy on the event loop, over its TLS connections to Redis: %q, %v", id2, err)
	}
	key := "{" + sku + "}tls-k"
	if err := tc.Set(ctx, key, "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := plain.Get(ctx, key).Result(); got != "v" || err != nil {
		t.Fatalf("GET of what a TLS client set: %q, %v", got, err)
	}
	popped := make(chan []string, 1)
	go func() { v, _ := tc.BLPop(ctx, 0, key+":q").Result(); popped <- v }()
	direct := redis.NewClient(&redis.Options{Addr: testenv.Standalone(t)}) // the same server's plaintext port
	defer direct.Close()
	eventually(t, 5*time.Second, "the BLPOP blocks in Redis", func() bool {
		return strings.Contains(direct.ClientList(ctx).Val(), "cmd=blpop")
	})
	plain.RPush(ctx, key+":q", "job")
	select {
	case v := <-popped:
		if len(v) != 2 || v[1] != "job" {
			t.Fatalf("BLPOP over TLS: %v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("BLPOP over TLS was not woken")
	}

	// Redis drops every connection of the proxy's: each is dialled again, over TLS.
	if err := direct.Do(ctx, "client", "kill", "type", "normal", "skipme", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "GET after Redis dropped the proxy's TLS connections", func() bool {
		return plain.Get(ctx, key).Val() == "v"
	})
	// A transaction whose spare connection Redis dropped is refused (as a client of Redis
	// whose connection dropped gets an error), and the next one goes through.
	eventually(t, 10*time.Second, "MULTI/EXEC over TLS", func() bool {
		_, err := tc.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key+":n", "1", time.Minute)
			p.Incr(ctx, key+":n")
			return nil
		})
		return err == nil
	})
	if got := plain.Get(ctx, key+":n").Val(); got != "2" {
		t.Fatalf("after MULTI/EXEC over TLS the counter is %q", got)
	}
	sub := tc.Subscribe(ctx, key+":ch")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the subscriber is counted", func() bool {
		return plain.Publish(ctx, key+":ch", "hello").Val() == 1
	})
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "hello" {
		t.Fatalf("a message over TLS: %+v, %v", msg, err)
	}

	_, tlsPort, _ := strings.Cut(s.tlsAddr, ":")
	_, plainPort, _ := strings.Cut(s.addr, ":")
	for _, tt := range []struct {
		c    *redis.Client
		port string
	}{{tc, tlsPort}, {plain, plainPort}} {
		shards, err := tt.c.ClusterShards(ctx).Result()
		if err != nil || len(shards) != 1 || len(shards[0].Nodes) != 1 || strconv.FormatInt(shards[0].Nodes[0].Port, 10) != tt.port {
			t.Fatalf("CLUSTER SHARDS: %+v, %v; want the port %s", shards, err, tt.port)
		}
	}

	host, port, _ := strings.Cut(s.tlsAddr, ":")
	out, err := exec.Command(testenv.Command(t, "redis-cli"), "--tls", "--cacert", file("ca.pem"), "--cert", file("client.pem"), "--key", file("client.key"),
		"-h", host, "-p", port, "PING").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "PONG" {
		t.Fatalf("redis-cli --tls PING: %q, %v", out, err)
	}
	out, _ = exec.Command("redis-cli", "--tls", "--cacert", file("ca.pem"), "-h", host, "-p", port, "PING").CombinedOutput()
	if strings.Contains(string(out), "PONG") {
		t.Fatal("a TLS client with no certificate was answered (tls.client_ca_file asks for one)")
	}
	out, _ = exec.Command("redis-cli", "-h", host, "-p", port, "PING").CombinedOutput()
	if strings.Contains(string(out), "PONG") {
		t.Fatal("a plaintext client was answered on the TLS listener")
	}

	db, err := schema.Open(cfg.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rc := connect.Redis(cfg.Redis)
	defer rc.Close()
	snk := sink.NewSink(cfg, db, rc, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- snk.Run(sctx, nil) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("sink: %v", err)
		}
	}()
	eventually(t, 30*time.Second, "the order in MySQL, through Kafka's SASL_SSL and MySQL's TLS", func() bool {
		var n int
		return s.db.QueryRow(`SELECT COUNT(*) FROM seckill_orders WHERE order_id = ?`, id).Scan(&n) == nil && n == 1
	})
}

// TestTLSCluster: in front of the cluster over TLS (each node's TLS port, reached through
// redis.address_map from the plaintext addresses the cluster announces, as a NAT would), buys
// on three masters are told after their WAIT, pass-through reaches every slot, a cross-slot
// MGET is split, and every master's connections from the proxy are TLS ones.
func TestTLSCluster(t *testing.T) {
	dir := testenv.TLS(t)
	file := func(n string) string { return filepath.Join(dir, n) }
	s := start(t, func(c *conf.Config) {
		c.Redis.TLS = conf.TLS{Enabled: true, CAFile: file("ca.pem"), CertFile: file("client.pem"), KeyFile: file("client.key")}
		c.Redis.AddressMap = nil
		for _, p := range []int{7000, 7001, 7002, 7003, 7004, 7005} {
			c.Redis.AddressMap = append(c.Redis.AddressMap, "127.0.0.1:"+strconv.Itoa(p)+"=127.0.0.1:"+strconv.Itoa(p+100))
		}
	})
	ctx := context.Background()
	c := s.client(t, 4)
	for i := range 3 {
		sku := newSKU("tlsc" + strconv.Itoa(i))
		s.sale(t, c, sku, 10)
		for j := range 3 {
			if id, err := c.Do(ctx, "seckill.buy", sku, "u"+strconv.Itoa(j)).Text(); err != nil || id == "" {
				t.Fatalf("buy %d of %s over TLS: %q, %v", j, sku, id, err)
			}
		}
	}
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = "tlsc:" + strconv.Itoa(i)
		if err := c.Set(ctx, keys[i], i, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	vals, err := c.MGet(ctx, keys...).Result()
	if err != nil || len(vals) != len(keys) || vals[29] != "29" {
		t.Fatalf("a cross-slot MGET over TLS: %v, %v", vals, err)
	}
	var masters atomic.Int32 // ForEachMaster calls it on a goroutine per master
	_ = s.rc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		masters.Add(1)
		return nil
	})
	for _, p := range []int{7000, 7001, 7002, 7003, 7004, 7005} {
		direct := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(p)})
		role, _ := direct.Do(ctx, "role").Slice()
		list := direct.ClientList(ctx).Val()
		_ = direct.Close()
		if len(role) > 0 && role[0] == "master" && !strings.Contains(list, "laddr=127.0.0.1:"+strconv.Itoa(p+100)) {
			t.Errorf("master %d has no TLS connection:\n%s", p, list)
		}
	}
	if masters.Load() != 3 {
		t.Fatalf("%d masters through TLS, want 3", masters.Load())
	}
}
