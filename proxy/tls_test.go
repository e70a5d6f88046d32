package proxy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// TestCertificateRotationUnderLoad: while buyers open new TLS connections and buy, the
// listener's certificate is replaced on disk several times, once by garbage: no buy fails,
// and the buyers see the new certificates.
func TestCertificateRotationUnderLoad(t *testing.T) {
	certs := testenv.TLS(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.pem"), filepath.Join(dir, "tls.key")
	issue := func(serial int64) {
		t.Helper()
		caPEM, _ := os.ReadFile(filepath.Join(certs, "ca.pem"))
		caKeyPEM, _ := os.ReadFile(filepath.Join(certs, "ca.key"))
		pair, err := tls.X509KeyPair(caPEM, caKeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "rotated"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, pair.Leaf, &key.PublicKey, pair.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		// As a secret mount changes: new files renamed over the old.
		writeRenamed(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
		writeRenamed(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	issue(1)
	s := start(t, func(c *conf.Config) {
		c.TLSListen, c.TLS = "127.0.0.1:0", conf.ServerTLS{CertFile: certFile, KeyFile: keyFile}
	})
	plain := s.client(t, 1)
	sku := newSKU("rot")
	s.sale(t, plain, sku, 1_000_000)
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(filepath.Join(certs, "ca.pem"))
	pool.AppendCertsFromPEM(ca)

	ctx := context.Background()
	stop := make(chan struct{})
	var failed, bought atomic.Int64
	var seen sync.Map // certificate serials the buyers were shown
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c := redis.NewClient(&redis.Options{Addr: s.tlsAddr, TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1",
					VerifyConnection: func(cs tls.ConnectionState) error {
						seen.Store(cs.PeerCertificates[0].SerialNumber.Int64(), true)
						return nil
					}}, MaxRetries: -1, PoolSize: 1})
				err := c.Do(ctx, "seckill.buy", sku, "w"+strconv.Itoa(w)+"-"+strconv.Itoa(i)).Err()
				_ = c.Close()
				if err != nil {
					failed.Add(1)
					t.Logf("buy: %v", err)
					continue
				}
				bought.Add(1)
			}
		})
	}
	for serial := int64(2); serial <= 4; serial++ {
		time.Sleep(1500 * time.Millisecond) // the files are looked at once a second: let buys run on each
		if serial == 3 {
			writeRenamed(t, certFile, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n"))
			time.Sleep(1500 * time.Millisecond)
		}
		issue(serial)
	}
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	n := 0
	seen.Range(func(any, any) bool { n++; return true })
	if failed.Load() != 0 || bought.Load() == 0 || n < 3 {
		t.Fatalf("bought %d, failed %d, certificates seen %d (want 0 failed and at least 3 certificates)", bought.Load(), failed.Load(), n)
	}
	t.Logf("bought %d over new TLS connections, %d certificates seen, 0 failed", bought.Load(), n)
}

// writeRenamed replaces path with b as a secret mount does: a new file renamed over it.
func writeRenamed(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}
