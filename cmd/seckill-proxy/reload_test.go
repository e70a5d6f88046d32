package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/internal/testenv"
)

// freeAddr is a loopback address nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is the proxy's log, written by its process and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond every 20 ms until it holds or 20 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestReloadOnSIGHUP runs the real binary: a SIGHUP after the config file changed a user's
// password makes the old password fail and the new one work, leaves a connection logged in
// before it working, and names a setting that takes a restart (conf's tests check the rest).
func TestReloadOnSIGHUP(t *testing.T) {
	testenv.Redis(t)
	testenv.Kafka(t)
	testenv.MySQL(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "seckill-proxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr, adminAddr := freeAddr(t), freeAddr(t)
	config := filepath.Join(dir, "seckill.yaml")
	write := func(password, level, timeout string) {
		t.Helper()
		y := "log:\n  level: " + level + "\nredis:\n  command_timeout: " + timeout + "\n" +
			"admission:\n  buyer_attempts: 3\n" +
			"users:\n  - {name: shop, password: " + password + ", role: app}\n"
		if err := os.WriteFile(config, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("old-secret", "info", "5s")

	var logs syncBuffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "SECKILL_CONFIG="+config, "SECKILL_LISTEN="+addr, "SECKILL_ADMIN_LISTEN="+adminAddr)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("proxy log:\n%s", logs.String())
		}
	})
	ctx := context.Background()
	login := func(password string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr, Username: "shop", Password: password, MaxRetries: -1, Protocol: 2})
	}
	before := login("old-secret")
	defer before.Close()
	waitFor(t, "the proxy to answer the old password", func() bool { return before.Ping(ctx).Err() == nil })
	// One connection that stays open, logged in with the old password.
	conn := before.Conn()
	defer conn.Close()
	if err := conn.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	write("new-secret", "debug", "7s")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool { return strings.Contains(logs.String(), "reload: configuration applied") })

	old := login("old-secret")
	defer old.Close()
	if err := old.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("the old password after the reload: %v, want WRONGPASS", err)
	}
	fresh := login("new-secret")
	defer fresh.Close()
	if err := fresh.Ping(ctx).Err(); err != nil {
		t.Errorf("the new password after the reload: %v", err)
	}
	if err := conn.Ping(ctx).Err(); err != nil {
		t.Errorf("a connection logged in before the reload: %v", err)
	}
	if err := conn.Set(ctx, "reload:test", "x", time.Minute).Err(); err != nil {
		t.Errorf("a write on a connection logged in before the reload: %v", err)
	}
	log := logs.String()
	for _, want := range []string{`"setting":"redis.command_timeout"`, `"changed":["log.level","users"]`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %s", want)
		}
	}
	if strings.Contains(log, "new-secret") || strings.Contains(log, "old-secret") {
		t.Error("a password is in the log")
	}

	// The admin port's /reload does the same for a POST.
	write("third-secret", "debug", "7s")
	if resp, err := http.Get("http://" + adminAddr + "/reload"); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /reload: %v %v, want 405", resp, err)
	}
	resp, err := http.Post("http://"+adminAddr+"/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "reloaded\nusers\n" {
		t.Errorf("POST /reload: %d %q, want 200 \"reloaded\\nusers\\n\"", resp.StatusCode, body)
	}
	third := login("third-secret")
	defer third.Close()
	if err := third.Ping(ctx).Err(); err != nil {
		t.Errorf("the password of the second reload: %v", err)
	}
}
