package deploy

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"seckill-proxy/conf"
	"seckill-proxy/internal/loadtest"
	"seckill-proxy/internal/testenv"
)

// maxImageBytes bounds the image: two static binaries on a distroless base.
const maxImageBytes = 60 << 20

// TestImage builds the image from the repo's Dockerfile with podman (the base images are
// stand-ins built from this machine's Go and busybox, as build arguments), checks its user,
// entry points and size, and that -check-config in it refuses an unsafe configuration; then
// it runs the proxy and the sink from it on the host network in front of the dev stack and
// drives a sale through the container with the load tool, checking every invariant.
func TestImage(t *testing.T) {
	img := builtImage(t)

	var inspect []struct {
		Size   int64
		Config struct {
			User       string
			Entrypoint []string
			Env        []string
		}
	}
	if err := json.Unmarshal([]byte(mustPodman(t, "image", "inspect", img)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v", err)
	}
	ic := inspect[0]
	if ic.Config.User != "nonroot:nonroot" {
		t.Errorf("the image runs as %q, want nonroot:nonroot", ic.Config.User)
	}
	if strings.Join(ic.Config.Entrypoint, " ") != "/seckill-proxy" {
		t.Errorf("entry point %q, want /seckill-proxy", ic.Config.Entrypoint)
	}
	if ic.Size <= 0 || ic.Size > maxImageBytes {
		t.Errorf("the image is %d bytes, want at most %d", ic.Size, maxImageBytes)
	}
	t.Logf("image %s: %.1f MB, user %s", img, float64(ic.Size)/1e6, ic.Config.User)

	t.Run("check-config", func(t *testing.T) { checkConfigInImage(t, img) })
	t.Run("sale", func(t *testing.T) { saleThroughImage(t, img) })
}

// checkConfigInImage: both entry points accept the image's defaults (the proxy warns that it
// is in protected mode) and refuse an unsafe configuration with exit status 2.
func checkConfigInImage(t *testing.T, img string) {
	out, code := podman(t, "run", "--rm", "--network", "host", img, "-check-config")
	if code != 0 || !strings.Contains(out, "config OK") || !strings.Contains(out, "protected_mode") {
		t.Errorf("proxy -check-config with the image's defaults: exit %d\n%s", code, out)
	}
	out, code = podman(t, "run", "--rm", "--network", "host", "--entrypoint", "/seckill-sink", img, "-check-config")
	if code != 0 || !strings.Contains(out, "config OK") {
		t.Errorf("sink -check-config with the image's defaults: exit %d\n%s", code, out)
	}

	// -strict: the same defaults' warnings fail it; with users and an admin token, none is left.
	out, code = podman(t, "run", "--rm", "--network", "host", img, "-check-config", "-strict")
	if code != 2 || !strings.Contains(out, "protected_mode") || !strings.Contains(out, "refused for its warnings") || strings.Contains(out, "config OK") {
		t.Errorf("proxy -check-config -strict with the image's defaults: exit %d, want 2 after the warnings\n%s", code, out)
	}
	out, code = podman(t, "run", "--rm", "--network", "host", "-e", "SECKILL_USERS=shop:"+secret(t)+":app",
		"-e", "SECKILL_ADMIN_TOKEN="+secret(t), img, "-check-config", "-strict")
	if code != 0 || strings.TrimSpace(out) != "config OK" {
		t.Errorf("proxy -check-config -strict with users and a token: exit %d\n%s", code, out)
	}

	open := []string{"-e", "SECKILL_PROTECTED_MODE=false"}
	var placeholders []string
	for _, s := range find[*corev1.Secret](objects(t, "k8s/proxy-sidecar.yaml")) {
		for k, v := range s.StringData {
			placeholders = append(placeholders, "-e", k+"="+v)
		}
	}
	for _, tt := range []struct {
		name, entry string
		env         []string
		want        string
	}{
		{"open to the network, protected mode off", "/seckill-proxy", open, "every client that reaches it would be an admin"},
		{"the manifests' Secret as shipped", "/seckill-proxy", placeholders, "users shop: the secret is still a placeholder"},
		{"the sink with the manifests' Secret", "/seckill-sink", placeholders, "mysql.dsn: the secret is still a placeholder"},
	} {
		args := append([]string{"run", "--rm", "--network", "host", "--entrypoint", tt.entry}, tt.env...)
		out, code := podman(t, append(args, img, "-check-config")...)
		if code != 2 || !strings.Contains(out, "unsafe configuration refused") || !strings.Contains(out, tt.want) ||
			strings.Contains(out, "config OK") {
			t.Errorf("%s: exit %d, want 2 naming %q\n%s", tt.name, code, tt.want, out)
		}
	}
	// At start, not only at -check-config: the proxy does not serve an unsafe configuration.
	out, code = podman(t, append(append([]string{"run", "--rm", "--network", "host"}, open...), img)...)
	if code != 2 || !strings.Contains(out, "unsafe configuration refused") {
		t.Errorf("the proxy started with protected mode off on every interface: exit %d\n%s", code, out)
	}
}

// saleThroughImage runs the proxy and the sink from img on the host network, on ports of
// their own, with a topic and a consumer group of their own, and sells through the proxy's
// container.
func saleThroughImage(t *testing.T, img string) {
	testenv.Redis(t)
	testenv.Kafka(t)
	testenv.MySQL(t)
	cfg := testenv.Config(t)
	freePorts(t, "16380", "16381", "16382")
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() { testenv.DeleteTopics(t, cfg.Kafka.Brokers, "seckill.image."+run) }) // after the containers stop
	password, token := secret(t), secret(t)
	env := []string{
		"SECKILL_REDIS_ADDRS=" + strings.Join(cfg.Redis.Addrs, ","),
		"SECKILL_KAFKA_BROKERS=" + strings.Join(cfg.Kafka.Brokers, ","),
		"SECKILL_MYSQL_DSN=" + cfg.MySQL.DSN,
		"SECKILL_KAFKA_TOPIC=seckill.image." + run,
		"SECKILL_KAFKA_GROUP=seckill-image-" + run,
		"SECKILL_LISTEN=127.0.0.1:16380",
		"SECKILL_ADMIN_LISTEN=127.0.0.1:16381",
		"SECKILL_SINK_ADMIN_LISTEN=127.0.0.1:16382",
		"SECKILL_USERS=ops:" + password + ":admin",
		"SECKILL_ADMIN_TOKEN=" + token,
	}
	start := func(name, entry string) func() string {
		args := []string{"run", "-d", "--name", name, "--network", "host", "--entrypoint", entry}
		for _, e := range env {
			args = append(args, "-e", e)
		}
		podman(t, "rm", "-f", name)
		mustPodman(t, append(args, img)...)
		logs := func() string { out, _ := podman(t, "logs", "--tail", "40", name); return out }
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s:\n%s", name, logs())
			}
			podman(t, "rm", "-f", "-t", "5", name)
		})
		return logs
	}
	proxyLogs := start("seckill-test-proxy", "/seckill-proxy")
	sinkLogs := start("seckill-test-sink", "/seckill-sink")
	awaitHTTP(t, "http://127.0.0.1:16381/readyz", time.Minute, proxyLogs)
	if body := awaitHTTP(t, "http://127.0.0.1:16382/readyz", time.Minute, sinkLogs); !strings.Contains(body, "seckill.image."+run) {
		t.Errorf("the sink's /readyz %q does not name its topic", body)
	}
	for _, name := range []string{"seckill-test-proxy", "seckill-test-sink"} {
		pid := strings.TrimSpace(mustPodman(t, "inspect", "--format", "{{.State.Pid}}", name))
		if uid := processUID(t, pid); uid != "65532" {
			t.Errorf("%s runs as uid %s, want 65532 (nonroot)", name, uid)
		}
	}
	if got := status(t, "http://127.0.0.1:16381/debug/pprof/cmdline", ""); got != 401 {
		t.Errorf("pprof without the admin token: %d, want 401", got)
	}
	if got := status(t, "http://127.0.0.1:16381/debug/pprof/cmdline", "Bearer "+token); got != 200 {
		t.Errorf("pprof with the admin token: %d, want 200", got)
	}

	sellThrough(t, "127.0.0.1:16380", password, "image_"+run, cfg)
}

// sellThrough sells 300 units to 3,000 buyers (a fifth of them trying twice) through the proxy
// at addr, as the admin user ops, and checks the report: every unit sold exactly once, and
// every invariant of the load tool.
func sellThrough(t *testing.T, addr, password, sku string, services conf.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const units = 300
	rep, err := loadtest.Execute(ctx, loadtest.Options{
		Mode: loadtest.ModeProxy, Addr: addr, User: "ops", Password: password, SKU: sku,
		Units: units, Limit: 1, Check: true, Drain: 2 * time.Minute, Services: services,
		Load: loadtest.Load{Buyers: 3000, Conns: 20, Pipeline: 1, Qty: 1, RepeatShare: 0.2},
	}, io.Discard, io.Discard)
	if err != nil {
		t.Fatalf("the sale: %v", err)
	}
	if rep.Replies[loadtest.ReplyOrder] != units || rep.Requests != 3000 {
		t.Errorf("%d orders of %d requests, want %d of 3000: %v", rep.Replies[loadtest.ReplyOrder], rep.Requests, units, rep.Replies)
	}
	for _, c := range rep.Checks {
		if !c.OK {
			t.Errorf("check %s failed: %s", c.Name, c.Detail)
		}
	}
	if !rep.Passed || len(rep.Checks) == 0 {
		t.Errorf("the sale did not pass (%d checks)", len(rep.Checks))
	}
	t.Logf("sale %s through %s: %v, %d checks passed, drained in %.0f ms", sku, addr, rep.Replies, len(rep.Checks), rep.DrainMs)
}

// processUID is the real uid of the host process pid.
func processUID(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid in /proc/%s/status", pid)
	return ""
}
