// Package testenv gives integration tests the addresses of the real services that
// scripts/devstack.sh runs, read from the same SECKILL_* variables the binaries use.
//
// A test asks for a service with Redis, Kafka or MySQL. When the service does not answer,
// the test is skipped, unless SECKILL_REQUIRE_SERVICES=1 (as `make test` and CI set), in which
// case it fails. testenv never starts a service itself, and never stands in for one.
package testenv

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"seckill-proxy/conf"
	"seckill-proxy/internal/schema"

	"github.com/IBM/sarama"
)

// Required reports whether missing services fail tests rather than skip them.
func Required() bool { return os.Getenv(conf.EnvRequireServices) == "1" }

// Config is conf.Default overlaid with the SECKILL_* environment, as the binaries see it.
func Config(t testing.TB) conf.Config {
	t.Helper()
	c, err := conf.Load(nil, os.Environ())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return c
}

// missing skips or fails the test, as SECKILL_REQUIRE_SERVICES says.
func missing(t testing.TB, service string, err error) {
	t.Helper()
	msg := service + " is not reachable (" + err.Error() + "); run: scripts/devstack.sh up && eval \"$(scripts/devstack.sh env)\""
	if Required() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Command returns the path of the program name, which the dev stack installs.
func Command(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		missing(t, name, err)
	}
	return path
}

func dialAny(addrs []string) error {
	var err error
	for _, a := range addrs {
		var c net.Conn
		c, err = net.DialTimeout("tcp", a, time.Second)
		if err == nil {
			return c.Close()
		}
	}
	return err
}

// Redis returns the Redis Cluster seed addresses, once one of them accepts a connection.
func Redis(t testing.TB) []string {
	t.Helper()
	addrs := Config(t).Redis.Addrs
	if err := dialAny(addrs); err != nil {
		missing(t, "Redis Cluster "+strings.Join(addrs, ","), err)
	}
	return addrs
}

// Kafka returns the Kafka broker addresses, once one of them accepts a connection.
func Kafka(t testing.TB) []string {
	t.Helper()
	addrs := Config(t).Kafka.Brokers
	if err := dialAny(addrs); err != nil {
		missing(t, "Kafka "+strings.Join(addrs, ","), err)
	}
	return addrs
}

// MySQL opens the configured database as the binaries do (schema.Open) and pings it. The
// handle is closed when the test ends.
func MySQL(t testing.TB) *sql.DB {
	t.Helper()
	dsn := Config(t).MySQL.DSN
	db, err := schema.Open(Config(t).MySQL)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = db.PingContext(ctx)
		cancel()
	}
	if err != nil {
		missing(t, "MySQL "+conf.MaskDSN(dsn), err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// StandaloneAddr is the dev stack's plain (non-cluster) Redis server.
const StandaloneAddr = "127.0.0.1:7010"

// Standalone returns the plain Redis server's address, once it accepts a connection.
func Standalone(t testing.TB) string {
	t.Helper()
	if err := dialAny([]string{StandaloneAddr}); err != nil {
		missing(t, "standalone Redis "+StandaloneAddr, err)
	}
	return StandaloneAddr
}

// PrometheusURL is the dev stack's Prometheus.
const PrometheusURL = "http://127.0.0.1:19090"

// Prometheus returns the folder where the dev stack's Prometheus discovers scrape targets
// (files proxy-*.json and sink-*.json, in its file_sd format), once Prometheus answers.
func Prometheus(t testing.TB) string {
	t.Helper()
	resp, err := http.Get(PrometheusURL + "/-/ready")
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = errors.New(resp.Status)
		}
	}
	if err != nil {
		missing(t, "Prometheus", err)
	}
	return filepath.Join(StackDir(t), "prometheus", "targets")
}

// StackDir is scripts/devstack.sh's directory: SECKILL_STACK_DIR, or .stack at the top of
// the repository.
func StackDir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv(conf.EnvStackDir); dir != "" {
		return dir
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".stack")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testenv: no go.mod above the test's folder")
		}
		dir = parent
	}
}

// DeleteTopics deletes a test's own topics from the brokers; call it when the test's proxies
// and sinks have stopped (a producer still running would create them again). Topics left
// behind pile up: each partition is a directory whose files the broker keeps open. A topic
// already gone is no error; another failure is logged, not failed, since the test's
// assertions are made.
func DeleteTopics(t testing.TB, brokers []string, topics ...string) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Admin.Timeout = 10 * time.Second
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Logf("cannot delete the test's topics %v: %v", topics, err)
		return
	}
	defer admin.Close()
	for _, topic := range topics {
		if err := admin.DeleteTopic(topic); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			t.Logf("cannot delete the test's topic %s: %v", topic, err)
		}
	}
}
