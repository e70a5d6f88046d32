package router

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
)

// serve runs one pipeline through a router without a guard (no SECKILL commands) and
// returns the raw RESP written.
func serve(t *testing.T, r *Router, s *Session, cmds ...string) string {
	t.Helper()
	return serveCtx(t, context.Background(), r, s, cmds...)
}

// serveCtx is serve with the context the commands run in.
func serveCtx(t *testing.T, ctx context.Context, r *Router, s *Session, cmds ...string) string {
	t.Helper()
	var buf bytes.Buffer
	w := redcon.NewWriter(&buf)
	var batch [][][]byte
	for _, c := range cmds {
		var args [][]byte
		for _, f := range strings.Fields(c) {
			args = append(args, []byte(f))
		}
		batch = append(batch, args)
	}
	r.Serve(ctx, s, batch, w)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestConnectionCommands(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{MaxArgBytes: 16})
	tests := []struct {
		cmd, want string
	}{
		{"PING", "+PONG\r\n"},
		{"ping hello", "$5\r\nhello\r\n"},
		{"PING a b", "-ERR wrong number of arguments for 'ping' command\r\n"},
		{"ECHO hi", "$2\r\nhi\r\n"},
		{"echo", "-ERR wrong number of arguments for 'echo' command\r\n"},
		{"SELECT 0", "+OK\r\n"},
		{"SELECT 1", "-ERR DB index is out of range\r\n"},
		{"SELECT x", "-ERR value is not an integer or out of range\r\n"},
		{"HELLO 4", "-NOPROTO sorry, this protocol version is not supported.\r\n"},
		{"HELLO x", "-NOPROTO unsupported protocol version\r\n"},
		{"HELLO 2 BOGUS", "-ERR Syntax error in HELLO option 'BOGUS'\r\n"},
		{"CLIENT SETNAME app-1", "+OK\r\n"},
		{"CLIENT SETINFO LIB-NAME go-redis", "+OK\r\n"},
		{"CLIENT SETINFO COLOR red", "-ERR Unrecognized option 'COLOR'\r\n"},
		{"CLIENT KILL x", "-ERR No such client\r\n"},
		{"CLIENT NOSUCH", "-ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP.\r\n"},
		{"CLIENT SETNAME", "-ERR wrong number of arguments for 'client|setname' command\r\n"},
		{"COMMAND DOCS", "*0\r\n"},
		{"COMMAND COUNT", ":38\r\n"},
		{"COMMAND INFO nope", "*1\r\n$-1\r\n"},
		{"COMMAND INFO ping", "*1\r\n*10\r\n$4\r\nping\r\n:-1\r\n*0\r\n:0\r\n:0\r\n:0\r\n*0\r\n*0\r\n*0\r\n*0\r\n"},
		{"GETX a b", "-ERR unknown command 'GETX', with args beginning with: 'a' 'b' \r\n"},
		{"AUTH x", "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"},
		{"ECHO " + strings.Repeat("x", 17), "-ERR argument of 17 bytes is above limits.max_arg_bytes\r\n"},
		{"SECKILL.BUY sku", "-ERR wrong number of arguments for 'seckill.buy' command\r\n"},
		{"seckill.buy sku u 1 2", "-ERR wrong number of arguments for 'seckill.buy' command\r\n"},
		{"SECKILL.STATUS sku", "-ERR wrong number of arguments for 'seckill.status' command\r\n"},
		{"SECKILL.WARM", "-ERR wrong number of arguments for 'seckill.warm' command\r\n"},
		{"SECKILL.WARM bad! LIMIT 1", "-ERR sku must be 1-64 characters of [A-Za-z0-9_.:-], got \"bad!\"\r\n"},
		{"SECKILL.CLOSE", "-ERR wrong number of arguments for 'seckill.close' command\r\n"},
		{"SECKILL.CLOSE a b", "-ERR wrong number of arguments for 'seckill.close' command\r\n"},
		{"SECKILL.RELEASE sku", "-ERR wrong number of arguments for 'seckill.release' command\r\n"},
		{"SECKILL.RELEASE sku bad! ", "-ERR uid must be 1-64 characters of [A-Za-z0-9_.:-], got \"bad!\"\r\n"},
		{"SECKILL.CHECK", "-ERR wrong number of arguments for 'seckill.check' command\r\n"},
		{"SECKILL.CHECK bad!", "-ERR sku must be 1-64 characters of [A-Za-z0-9_.:-], got \"bad!\"\r\n"},
		{"SECKILL.INFO a b", "-ERR wrong number of arguments for 'seckill.info' command\r\n"},
		{"SECKILL.INFO bad!", "-ERR sku must be 1-64 characters of [A-Za-z0-9_.:-], got \"bad!\"\r\n"},
		{"SET seckill:{s}:x 2050", "-" + ProtectedKeysError + "\r\n"},
		{"hset seckill:{s}:m state open", "-" + ProtectedKeysError + "\r\n"},
	}
	for _, tt := range tests {
		if got := serve(t, r, r.NewSession("127.0.0.1:1"), tt.cmd); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.cmd, got, tt.want)
		}
	}
}

func TestSessionState(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{})
	s := r.NewSession("127.0.0.1:1")
	got := serve(t, r, s, "CLIENT GETNAME", "CLIENT SETNAME worker", "client getname", "HELLO 2 SETNAME w2", "CLIENT GETNAME")
	if !strings.HasPrefix(got, "$-1\r\n+OK\r\n$6\r\nworker\r\n*14\r\n") || !strings.HasSuffix(got, "$2\r\nw2\r\n") {
		t.Fatalf("got %q", got)
	}
	if got := serve(t, r, s, "CLIENT SETNAME has\x01ctl"); !strings.HasPrefix(got, "-ERR Client names cannot contain spaces") {
		t.Fatalf("got %q", got)
	}
	// A name, or a library's name or version, over MaxClientName is refused, by HELLO too, and
	// the connection keeps its name.
	long := strings.Repeat("n", MaxClientName+1)
	for _, cmd := range []string{"CLIENT SETNAME " + long, "HELLO 2 SETNAME " + long, "CLIENT SETINFO LIB-NAME " + long, "CLIENT SETINFO LIB-VER " + long} {
		if got := serve(t, r, s, cmd); !strings.HasPrefix(got, "-ERR ") || !strings.Contains(got, "over 512 bytes") {
			t.Errorf("%.30s...: got %.80q", cmd, got)
		}
	}
	if s.Name != "w2" || s.LibName != "" || s.LibVer != "" {
		t.Errorf("after the refusals: name %q, library %q %q", s.Name, s.LibName, s.LibVer)
	}
	if got := serve(t, r, s, "CLIENT SETNAME "+long[:MaxClientName]); got != "+OK\r\n" {
		t.Errorf("a name of MaxClientName bytes: %q", got)
	}
}

func TestQuitStopsThePipeline(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{})
	s := r.NewSession("127.0.0.1:1")
	if got := serve(t, r, s, "PING", "QUIT", "PING"); got != "+PONG\r\n+OK\r\n" || !s.Quit {
		t.Fatalf("got %q quit=%v", got, s.Quit)
	}
}

func TestAuth(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{Password: "s3cret"})
	s := r.NewSession("127.0.0.1:1")
	steps := []struct{ cmd, want string }{
		{"PING", "-NOAUTH Authentication required.\r\n"},
		{"NOSUCH", "-NOAUTH Authentication required.\r\n"},
		{"SECKILL.BUY sku u", "-NOAUTH Authentication required.\r\n"},
		{"HELLO 2", "-NOAUTH HELLO must be called with the client already authenticated"},
		{"AUTH wrong", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{"AUTH admin s3cret", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{"AUTH s3cret", "+OK\r\n"},
		{"PING", "+PONG\r\n"},
		{"AUTH wrong", "-WRONGPASS"},
		{"PING", "+PONG\r\n"}, // as in Redis, a failed AUTH keeps the earlier login
		{"HELLO 2 AUTH default s3cret", "*14\r\n"},
		{"PING", "+PONG\r\n"},
	}
	for i, st := range steps {
		if got := serve(t, r, s, st.cmd); !strings.HasPrefix(got, st.want) {
			t.Errorf("step %d %s:\n got %q\nwant prefix %q", i, st.cmd, got, st.want)
		}
	}
}

func TestRoles(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{Password: "root-pw", Users: []conf.User{
		{Name: "shop", Password: "shop-pw", Role: conf.RoleApp},
		{Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin},
	}})
	app := r.NewSession("127.0.0.1:1")
	if got := serve(t, r, app, "AUTH shop shop-pw", "SECKILL.WARM sku_1", "SECKILL.CLOSE sku_1", "SECKILL.RELEASE sku_1 u1", "SECKILL.CHECK sku_1", "PING"); got !=
		"+OK\r\n"+
			"-NOPERM User shop has no permissions to run the 'seckill.warm' command\r\n"+
			"-NOPERM User shop has no permissions to run the 'seckill.close' command\r\n"+
			"-NOPERM User shop has no permissions to run the 'seckill.release' command\r\n"+
			"-NOPERM User shop has no permissions to run the 'seckill.check' command\r\n"+
			"+PONG\r\n" {
		t.Fatalf("app user: %q", got)
	}
	for _, login := range []string{"AUTH ops ops-pw", "AUTH root-pw", "AUTH default root-pw"} {
		s := r.NewSession("127.0.0.1:1")
		// An admin passes the permission check and reaches argument checks.
		if got := serve(t, r, s, login, "SECKILL.WARM bad!"); got != "+OK\r\n-ERR sku must be 1-64 characters of [A-Za-z0-9_.:-], got \"bad!\"\r\n" {
			t.Fatalf("%s: %q", login, got)
		}
	}
	s := r.NewSession("127.0.0.1:1")
	if got := serve(t, r, s, "AUTH nobody x", "AUTH ops shop-pw", "SECKILL.BUY sku u"); got !=
		"-WRONGPASS invalid username-password pair or user is disabled.\r\n"+
			"-WRONGPASS invalid username-password pair or user is disabled.\r\n"+
			"-NOAUTH Authentication required.\r\n" {
		t.Fatalf("bad logins: %q", got)
	}
}

func TestUsersWithoutDefaultPassword(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{Users: []conf.User{{Name: "shop", Password: "pw", Role: conf.RoleApp}}})
	if got := serve(t, r, r.NewSession("127.0.0.1:1"), "PING", "AUTH pw", "AUTH default pw", "AUTH shop pw", "PING"); got !=
		"-NOAUTH Authentication required.\r\n"+
			"-WRONGPASS invalid username-password pair or user is disabled.\r\n"+
			"-WRONGPASS invalid username-password pair or user is disabled.\r\n"+
			"+OK\r\n+PONG\r\n" {
		t.Fatalf("got %q", got)
	}
}

func TestInfo(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{Clients: func() int64 { return 7 }})
	got := serve(t, r, r.NewSession("127.0.0.1:1"), "INFO clients")
	if !strings.Contains(got, "# Clients\r\nconnected_clients:7\r\n") || strings.Contains(got, "# Server") {
		t.Fatalf("INFO clients: %q", got)
	}
	got = serve(t, r, r.NewSession("127.0.0.1:1"), "INFO")
	for _, want := range []string{"# Server\r\n", "redis_version:", "# Clients\r\n", "# Stats\r\n", "total_commands_processed:"} {
		if !strings.Contains(got, want) {
			t.Errorf("INFO lacks %q: %q", want, got)
		}
	}
}

func TestWriteError(t *testing.T) {
	tests := []struct{ err, want string }{
		{"SOLDOUT sku_1", "-SOLDOUT sku_1\r\n"},
		{"DUPLICATE abc", "-DUPLICATE abc\r\n"},
		{"something broke", "-ERR something broke\r\n"},
		{"line\r\nbreak", "-ERR line  break\r\n"},
		{"", "-ERR \r\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		w := redcon.NewWriter(&buf)
		WriteError(w, respError(tt.err))
		_ = w.Flush()
		if buf.String() != tt.want {
			t.Errorf("WriteError(%q) = %q, want %q", tt.err, buf.String(), tt.want)
		}
	}
}

// TestAuthFailures: a connection's failed AUTHs in a row are counted; the tenth closes it (and
// nothing after it is served); a success starts the count again; INFO counts them; and the log
// says so at most once a second, never with the password.
func TestAuthFailures(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	r := New(nil, zap.New(core), Options{Password: "right"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no waiting between failures in this test
	wrong := "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	s := r.NewSession("127.0.0.1:1")
	s.Remote = "10.0.0.9:5000"
	if got := serveCtx(t, ctx, r, s, "AUTH nope1", "AUTH nope2", "AUTH right", "AUTH nope3"); got != wrong+wrong+"+OK\r\n"+wrong {
		t.Fatalf("with a success between: %q", got)
	}
	cmds := make([]string, 20)
	for i := range cmds {
		cmds[i] = "AUTH guess" + strings.Repeat("x", i)
	}
	got := serveCtx(t, ctx, r, s, cmds...)
	if want := strings.Repeat(wrong, 8) + "-ERR too many failed AUTH attempts on this connection; closing it\r\n"; got != want || !s.Quit {
		t.Fatalf("20 guesses: %q (quit %v)", got, s.Quit)
	}
	info := serveCtx(t, ctx, r, r.NewSession("127.0.0.1:1"), "AUTH right", "INFO stats")
	for _, want := range []string{"auth_failures:12\r\n", "auth_failures_closed_connections:1\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q: %q", want, info)
		}
	}
	entries := logs.FilterMessage("failed AUTH").All()
	if len(entries) != 1 {
		t.Fatalf("%d log lines for 12 failures within a second, want 1", len(entries))
	}
	for _, e := range logs.All() {
		if strings.Contains(fmt.Sprint(e.ContextMap()), "nope") || strings.Contains(fmt.Sprint(e.ContextMap()), "guess") {
			t.Fatalf("a password in the log: %v", e.ContextMap())
		}
	}
	if remote := entries[0].ContextMap()["remote"]; remote != "10.0.0.9:5000" {
		t.Fatalf("logged remote %v", remote)
	}
}

func TestCompatReply(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int64
		ok   bool
	}{
		{nil, 1, true},
		{guard.NewLimited(guard.LimitedRate, time.Millisecond), -2, true},
		{&guard.DuplicateError{OrderID: "o1"}, -1, true},
		{fmt.Errorf("%w sku_1", guard.ErrSoldOut), 0, true},
		{fmt.Errorf("%w ended", guard.ErrClosed), 0, false},
	} {
		if got, ok := compatReply(tt.err); got != tt.want || ok != tt.ok {
			t.Errorf("compatReply(%v) = %d, %v; want %d, %v", tt.err, got, ok, tt.want, tt.ok)
		}
	}
}
