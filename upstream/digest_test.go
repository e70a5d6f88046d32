package upstream

import (
	"bufio"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill-proxy/internal/resp"
	"seckill-proxy/internal/testenv"
)

// privateRedis starts a redis-server of the test's own, with DEBUG on, and returns a
// function that sends it one command and returns its raw reply.
func privateRedis(t *testing.T) func(args ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command(testenv.Command(t, "redis-server"), "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--enable-debug-command", "yes", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var nc net.Conn
	for deadline := time.Now().Add(5 * time.Second); ; {
		if nc, err = net.Dial("tcp", ln.Addr().String()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // redis-server listens within milliseconds; no event to await
	}
	t.Cleanup(func() { _ = nc.Close() })
	r := bufio.NewReader(nc)
	return func(args ...string) string {
		t.Helper()
		if _, err := nc.Write(appendCommand(nil, argsOf(strings.Join(args, " ")))); err != nil {
			t.Fatal(err)
		}
		reply, err := resp.ReadReply(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(reply)
	}
}

// TestCombineDigests: the digests of servers that hold parts of a data set combine into the
// digest one server holding all of it gives, checked against a redis-server: keys a and b
// apart, then together; two and three parts, empty ones among them.
func TestCombineDigests(t *testing.T) {
	do := privateRedis(t)
	digest := func() string {
		t.Helper()
		d := do("DEBUG", "DIGEST")
		if len(d) != 43 || d[0] != '+' {
			t.Fatalf("DEBUG DIGEST: %q", d)
		}
		return d[1:41]
	}
	parts := map[string][]string{"a": {"SET a 1"}, "b": {"RPUSH b x y"}, "c": {"HSET c f v"}}
	apart := map[string]string{}
	for name, cmds := range parts {
		do("FLUSHALL")
		for _, c := range cmds {
			do(strings.Fields(c)...)
		}
		apart[name] = digest()
	}
	do("FLUSHALL")
	if got, ok := combineDigests([]string{emptyDigest, digest()}); !ok || got != emptyDigest {
		t.Errorf("empty servers: %q, %v", got, ok)
	}
	for _, set := range [][]string{{"a"}, {"a", "b"}, {"a", "b", "c"}} {
		do("FLUSHALL")
		var ds []string
		for _, name := range set {
			for _, c := range parts[name] {
				do(strings.Fields(c)...)
			}
			ds = append(ds, apart[name], emptyDigest)
		}
		want := digest()
		if got, ok := combineDigests(ds); !ok || got != want {
			t.Errorf("%v apart, combined: %q (%v); one server with all of them: %q", set, got, ok, want)
		}
	}
	for _, bad := range [][]string{{"xyz"}, {strings.Repeat("g", 40)}} {
		if _, ok := combineDigests(bad); ok {
			t.Errorf("%q combined", bad)
		}
	}
}
