package proxy_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"seckill-proxy/internal/testenv"
)

// TestRealClients runs real clients at pinned versions through the proxy in front of the
// cluster, each with its default settings, as a plain client and as a cluster client through
// the facade (scripts/clients/run.sh installs them once into a cache): SET/GET, a pipeline,
// MULTI on one slot, pub/sub (an ioredis subscription held past every Redis timeout) and the sale, with -DUPLICATE and -SOLDOUT surfaced as errors.
// redis-py 8 and node-redis 6 must have spoken RESP3.
func TestRealClients(t *testing.T) {
	s := start(t, nil)
	c := s.client(t, 1)
	clients := []struct {
		lang, tool string
		skus       int
		want       []string
	}{
		{"python", "python3", 2, []string{"redis-py 8.1.0 Redis: SET/GET, pipeline, MULTI, pub/sub, BUY, DUPLICATE, SOLDOUT ok (resp=3)", "redis-py 8.1.0 RedisCluster: SET/GET"}},
		{"node", "node", 4, []string{"node-redis createClient: ok (resp=3)", "node-redis createCluster: ok", "ioredis Redis: ok", "ioredis Cluster: ok",
			"ioredis subscriber held 12 s: 24 of 24 messages, 0 reconnections"}},
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
			out, err := exec.CommandContext(ctx, "../scripts/clients/run.sh", args...).CombinedOutput()
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
