package proxy_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"seckill-proxy/conf"
	"seckill-proxy/internal/testenv"
)

// TestRealClients runs real clients at pinned versions through the proxy in front of the
// cluster, each with its default settings, as a plain client and as a cluster client through
// the facade (scripts/clients/run.sh installs them once into a cache): SET/GET, a pipeline,
// MULTI on one slot, pub/sub (an ioredis subscription held past every Redis timeout) and the sale, with -DUPLICATE and -SOLDOUT surfaced as errors.
// redis-py 8 and node-redis 6 must have spoken RESP3.
func TestRealClients(t *testing.T) {
	certs := testenv.TLS(t)
	s := start(t, func(c *conf.Config) { // and a TLS listener, which redis-py tries too
		c.TLSListen = "127.0.0.1:0"
		c.TLS = conf.ServerTLS{CertFile: filepath.Join(certs, "server.pem"), KeyFile: filepath.Join(certs, "server.key")}
	})
	c := s.client(t, 1)
	clients := []struct {
		lang, tool string
		skus       int
		want       []string
	}{
		{"python", "python3", 4, []string{"redis-py 8.1.0 Redis: SET/GET, pipeline, MULTI, pub/sub, BUY, DUPLICATE, SOLDOUT ok (resp=3)", "redis-py 8.1.0 RedisCluster: SET/GET",
			"redis-py 8.1.0 Redis over TLS: SET/GET, pipeline, MULTI, pub/sub, BUY, DUPLICATE, SOLDOUT ok (resp=3)", "redis-py 8.1.0 RedisCluster over TLS: SET/GET"}},
		{"node", "node", 6, []string{"node-redis createClient: ok (resp=3)", "node-redis createCluster: ok", "ioredis Redis: ok", "ioredis Cluster: ok",
			"ioredis subscriber held 12 s: 24 of 24 messages, 0 reconnections", "node-redis createClient over TLS: ok", "ioredis Cluster over TLS: ok"}},
		{"java", "mvn", 2, []string{"Jedis RedisClient: SET/GET, pipeline, MULTI, pub/sub, BUY, DUPLICATE, SOLDOUT ok", "Jedis RedisClusterClient: SET/GET"}},
	}
	for _, cl := range clients {
		t.Run(cl.lang, func(t *testing.T) {
			if _, err := exec.LookPath(cl.tool); err != nil {
				if testenv.Required() {
					t.Fatalf("%s is not installed: %v", cl.tool, err)
				}
				t.Skipf("%s is not installed", cl.tool)
			}
			args := []string{cl.lang, s.addr}
			for range cl.skus {
				sku := newSKU("cl" + cl.lang[:2])
				s.sale(t, c, sku, 1)
				args = append(args, sku)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a cold install
			defer cancel()
			cmd := exec.CommandContext(ctx, "../scripts/clients/run.sh", args...)
			cmd.Env = append(os.Environ(), "CHECK_TLS_ADDR="+s.tlsAddr, "CHECK_TLS_CA="+filepath.Join(certs, "ca.pem"))
			out, err := cmd.CombinedOutput()
			t.Logf("%s", out)
			if err != nil {
				t.Fatalf("run.sh %s: %v", cl.lang, err)
			}
			for _, w := range cl.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("no %q in the output", w)
				}
			}
		})
	}
}

// TestRedisson: Redisson 3.52 and 4.7 with their default Config, only the address and the user set,
// through the proxy (useSingleServer) and its cluster facade (useClusterServers), as an admin
// and as an app user with no redis.app_scripts: bucket, atomic long, map, locks (reentrant,
// contended, with a lease), read-write lock, semaphore, rate limiter, topic, blocking queue,
// scored sorted set, batch, transaction, bloom filter, map cache with a TTL. In cluster mode
// Redisson sends WAIT after each lock, for INFO's connected_slaves replicas. The read-write
// lock's unlock script loops on a counter stored in the lock's hash, which an app user can set:
// it runs fueled (redis.app_script_fuel).
func TestRedisson(t *testing.T) {
	t.Run("3.52", func(t *testing.T) { runClientChecks(t, "redisson", "Redisson", 32) })
	t.Run("4.7", func(t *testing.T) { runClientChecks(t, "redisson4", "Redisson", 32) })
}

// TestSpringDataRedis: Spring Data Redis 4.1 with its defaults (Lettuce), through the proxy
// (a standalone connection factory) and its cluster facade (a cluster one), as an admin and as
// an app user: StringRedisTemplate's values, hashes and lists, and the cache behind @Cacheable
// and @CacheEvict, whose allEntries clearing runs KEYS and then DEL.
func TestSpringDataRedis(t *testing.T) {
	runClientChecks(t, "spring", "Spring Data Redis", 8)
}

// runClientChecks runs scripts/clients/run.sh's kind of Java client against a proxy as an
// admin (ops) and as an app user (shop), and wants each run's summary line, "<title> <user>:
// <checks> of <checks> checks pass".
func runClientChecks(t *testing.T, kind, title string, checks int) {
	t.Helper()
	if _, err := exec.LookPath("mvn"); err != nil {
		if testenv.Required() {
			t.Fatalf("mvn is not installed: %v", err)
		}
		t.Skip("mvn is not installed")
	}
	s := start(t, func(c *conf.Config) {
		c.Users = []conf.User{{Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}, {Name: "shop", Password: "shop-pw", Role: conf.RoleApp}}
	})
	for _, u := range []struct{ user, password string }{{"ops", "ops-pw"}, {"shop", "shop-pw"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a cold install
		out, err := exec.CommandContext(ctx, "../scripts/clients/run.sh", kind, s.addr, u.user, u.password).CombinedOutput()
		cancel()
		var summary []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "FAIL ") || strings.HasPrefix(l, title+" ") {
				summary = append(summary, l)
			}
		}
		t.Logf("%s: %s", u.user, strings.Join(summary, "\n"))
		if err != nil {
			t.Fatalf("run.sh %s as %s: %v\n%s", kind, u.user, err, out)
		}
		if want := fmt.Sprintf("%s %s: %d of %d checks pass\n", title, u.user, checks, checks); !strings.Contains(string(out), want) {
			t.Errorf("as %s: no %q in the output", u.user, want)
		}
	}
}
