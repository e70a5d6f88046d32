package conf

import (
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestChanged(t *testing.T) {
	a := Default()
	if got := Changed(a, a); len(got) != 0 {
		t.Fatalf("Changed of a config with itself: %v", got)
	}
	b := Default()
	b.Users = []User{{Name: "shop", Password: "x", Role: RoleApp}}
	b.Redis.CommandTimeout = a.Redis.CommandTimeout + time.Second
	b.Log.Level = "debug"
	if got, want := Changed(a, b), []string{"log.level", "redis.command_timeout", "users"}; !slices.Equal(got, want) {
		t.Fatalf("Changed = %v, want %v", got, want)
	}
}

func TestReloader(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	start := Default()
	next := start
	next.Password = "new"
	next.Log.Level = "warn"
	next.Kafka.Topic = "other"
	var loadErr error
	level := zap.NewAtomicLevelAt(zapcore.InfoLevel)
	r := &Reloader{Reloadable: map[string]bool{"password": true},
		load: func() (Config, error) { return next, loadErr }, level: level, started: start, last: start, log: zap.New(core)}
	var applied []Config
	r.Apply = func(c Config) { applied = append(applied, c) }

	changed, err := r.Reload()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"log.level", "password"}; !slices.Equal(changed, want) {
		t.Errorf("changed %v, want %v", changed, want)
	}
	if len(applied) != 1 || applied[0].Password != "new" {
		t.Errorf("Apply got %+v", applied)
	}
	if level.Level() != zapcore.WarnLevel {
		t.Errorf("level %v after the reload, want warn", level.Level())
	}
	if n := logs.FilterField(zap.String("setting", "kafka.topic")).Len(); n != 1 {
		t.Errorf("%d log lines name kafka.topic as needing a restart, want 1", n)
	}
	for _, e := range logs.All() {
		for _, f := range e.Context {
			if f.String == "new" {
				t.Errorf("a password in the log: %v", e)
			}
		}
	}

	// A configuration that does not load changes nothing.
	loadErr = errors.New("bad file")
	next.Log.Level = "debug"
	if _, err := r.Reload(); err == nil {
		t.Error("a bad configuration reloaded")
	}
	if len(applied) != 1 || level.Level() != zapcore.WarnLevel {
		t.Errorf("a bad configuration was applied: %d applies, level %v", len(applied), level.Level())
	}
}

// A reload reads the same file again, with the same flags on top.
func TestCommandLineReloadReadsTheFileAgain(t *testing.T) {
	path := t.TempDir() + "/seckill.yaml"
	write := func(y string) {
		if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("password: one\nlog:\n  level: info\n")
	cl, err := ParseCommandLine("test", []string{"-config", path, "-log.level", "warn"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	write("password: two\nlog:\n  level: debug\n")
	next, err := cl.reload()
	if err != nil {
		t.Fatal(err)
	}
	if next.Password != "two" || next.Log.Level != "warn" {
		t.Errorf("reloaded password %q, level %q; want two, and the flag's warn", next.Password, next.Log.Level)
	}
	write("redis:\n  mode: weird\n")
	if _, err := cl.reload(); err == nil {
		t.Error("an invalid file reloaded")
	}
}

// TestConfigFileReadSafely: the configuration file is read only if it is a regular file (a
// symlink to one too, as Kubernetes mounts a ConfigMap) of at most MaxConfigFile bytes: a
// FIFO is refused at once, where opening it waited for a writer and held every later reload;
// a directory and a huge file are refused; a read while an earlier one is still hung fails at
// once.
func TestConfigFileReadSafely(t *testing.T) {
	dir := t.TempDir()
	good := dir + "/seckill.yaml"
	if err := os.WriteFile(good, []byte("password: one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := dir + "/link.yaml"
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if b, err := readConfigFile(link); err != nil || string(b) != "password: one\n" {
		t.Fatalf("a symlink to a regular file: %q, %v", b, err)
	}
	fifo := dir + "/fifo.yaml"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := dir + "/big.yaml"
	if err := os.WriteFile(big, make([]byte, MaxConfigFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "not a regular file", dir: "not a regular file", big: "over 1048576"} {
		done := make(chan error, 1)
		go func() { _, err := readConfigFile(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want %q", path, err, want)
			}
		case <-time.After(ReadTimeout / 2):
			t.Fatalf("%s: the read hangs", path)
		}
	}
	if _, err := ParseCommandLine("test", []string{"-config", fifo}, nil, io.Discard); err == nil {
		t.Error("a FIFO as the config file was accepted at start")
	}
	reading.Store(true) // a read that has not returned
	_, err := readConfigFile(good)
	reading.Store(false)
	if err == nil || !strings.Contains(err.Error(), "has not returned") {
		t.Errorf("a read beside a hung one: %v", err)
	}
}
