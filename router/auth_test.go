package router

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/conf"
)

// TestProtectedMode: with no password and no users, a client from outside loopback is
// refused (-DENIED) and closed, as redis-server in protected mode refuses it; a loopback
// client is served; with protected_mode off, or with credentials, both are served.
func TestProtectedMode(t *testing.T) {
	for _, tt := range []struct {
		name      string
		opt       Options
		remote    string
		wantStart string
	}{
		{"open, from the network", Options{ProtectedMode: true}, "10.1.2.3:5000", "-DENIED"},
		{"open, over IPv6", Options{ProtectedMode: true}, "[2001:db8::1]:5000", "-DENIED"},
		{"open, from loopback", Options{ProtectedMode: true}, "127.0.0.1:5000", "+PONG"},
		{"open, from ::1", Options{ProtectedMode: true}, "[::1]:5000", "+PONG"},
		{"protected mode off", Options{}, "10.1.2.3:5000", "+PONG"},
		{"with a password", Options{ProtectedMode: true, Password: "pw"}, "10.1.2.3:5000", "-NOAUTH"},
	} {
		r := New(nil, zap.NewNop(), tt.opt)
		s := r.NewSession(tt.remote)
		if got := serve(t, r, s, "PING"); !strings.HasPrefix(got, tt.wantStart) {
			t.Errorf("%s: %q, want %s...", tt.name, got, tt.wantStart)
		}
		if denied := strings.HasPrefix(tt.wantStart, "-DENIED"); s.Quit != denied {
			t.Errorf("%s: closing %v, want %v", tt.name, s.Quit, denied)
		}
	}
}

// TestReloadRevokes: a reload that removes a user (or the default password) revokes the
// connections logged in with it at their next command; a changed password keeps them, as in
// Redis; a downgraded admin loses its admin commands at once; other users' connections go on.
func TestReloadRevokes(t *testing.T) {
	users := []conf.User{{Name: "ops", Password: "ops-pw", Role: conf.RoleAdmin}, {Name: "shop", Password: "shop-pw", Role: conf.RoleApp}}
	for _, tt := range []struct {
		name     string
		password string
		users    []conf.User
		revoked  []string
	}{
		{"ops removed", "root", users[1:], []string{"ops"}},
		{"ops downgraded", "root", []conf.User{{Name: "ops", Password: "ops-pw", Role: conf.RoleApp}, users[1]}, nil},
		{"shop's password changed", "root", []conf.User{users[0], {Name: "shop", Password: "new", Role: conf.RoleApp}}, nil},
		{"the default password removed", "", users, []string{"default"}},
		{"nothing changed", "root", users, nil},
	} {
		r := New(nil, zap.NewNop(), Options{Password: "root", Users: users})
		sess := map[string]*Session{}
		for _, login := range []string{"AUTH ops ops-pw", "AUTH shop shop-pw", "AUTH root"} {
			s := r.NewSession("127.0.0.1:1")
			if got := serve(t, r, s, login); got != "+OK\r\n" {
				t.Fatalf("%s: %q", login, got)
			}
			sess[s.User] = s
		}
		r.SetCredentials(tt.password, tt.users)
		for name, s := range sess {
			got := serve(t, r, s, "PING")
			want := "+PONG\r\n"
			for _, rv := range tt.revoked {
				if rv == name {
					want = "-" + errRevoked.Error() + "\r\n"
				}
			}
			if got != want || (want != "+PONG\r\n") != s.Quit {
				t.Errorf("%s: %s's PING = %q (closing %v), want %q", tt.name, name, got, s.Quit, want)
			}
		}
		if got := serve(t, r, sess["ops"], "SECKILL.WARM bad!"); tt.name == "ops downgraded" && !strings.HasPrefix(got, "-NOPERM") {
			t.Errorf("a downgraded admin's WARM: %q, want NOPERM", got)
		}
	}
}

// TestAuthBoundedPerSource: a guesser who reconnects after every few guesses is refused,
// unchecked, once its address has failed authSourceBurst times; another address is not; a
// user's budget bounds guesses from many addresses.
func TestAuthBoundedPerSource(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{Users: []conf.User{{Name: "shop", Password: "shop-pw", Role: conf.RoleApp}}})
	now := time.Now()
	r.auth.now = func() time.Time { return now } // no budget refills while the test runs
	guess := func(remote, login string) string {
		return serve(t, r, r.NewSession(remote), login)
	}
	for i := range authSourceBurst {
		if got := guess("10.0.0.1:"+string(rune('0'+i%10)), "AUTH shop wrong"); !strings.HasPrefix(got, "-WRONGPASS invalid") {
			t.Fatalf("guess %d: %q", i, got)
		}
	}
	if got := guess("10.0.0.1:9", "AUTH shop shop-pw"); !strings.HasPrefix(got, "-WRONGPASS too many failed AUTHs from this address") {
		t.Fatalf("the right password from a spent address: %q, want it refused unchecked", got)
	}
	if got := guess("10.0.0.2:1", "AUTH shop shop-pw"); got != "+OK\r\n" {
		t.Fatalf("another address: %q", got)
	}
	if n := r.auth.limitedSource.Load(); n != 1 {
		t.Fatalf("auth_limited_source = %d, want 1", n)
	}
	for i := 0; i < authUserBurst; i++ {
		guess("10.1."+string(rune('0'+i/10))+"."+string(rune('0'+i%10))+":1", "AUTH shop wrong")
	}
	if got := guess("10.9.9.9:1", "AUTH shop wrong"); !strings.HasPrefix(got, "-WRONGPASS too many failed AUTHs for this user") {
		t.Fatalf("a user whose budget is spent: %q", got)
	}
	if got := guess("10.9.9.8:1", "AUTH shop shop-pw"); !strings.HasPrefix(got, "-WRONGPASS too many failed AUTHs for this user") {
		t.Fatalf("the right password from a new address, the user's budget spent: %q, want it refused unchecked", got)
	}
	// The service's own address, which logged in before, still logs in: a guesser elsewhere
	// cannot lock it out (before, 0 of 32 logins passed during such an attack).
	if got := guess("10.0.0.2:7", "AUTH shop shop-pw"); got != "+OK\r\n" {
		t.Fatalf("the right password from an address that logged in before, the user's budget spent: %q", got)
	}
	if got := guess("10.0.0.2:8", "AUTH shop wrong"); !strings.HasPrefix(got, "-WRONGPASS invalid") {
		t.Fatalf("a wrong password from that address: %q, want it checked (and refused)", got)
	}
	now = now.Add(authSourceEvery)
	if got := guess("10.0.0.1:9", "AUTH shop wrong"); !strings.HasPrefix(got, "-WRONGPASS invalid") {
		t.Fatalf("a spent address one refill later: %q, want its AUTH checked again", got)
	}
}

func TestFailureLimitsBounded(t *testing.T) {
	f := newFailureLimits(time.Second, 2)
	now := time.Now()
	for i := range authTableMax + 10 {
		f.fail(string(rune(i)), now)
	}
	if len(f.m) > authTableMax {
		t.Fatalf("%d entries, want at most %d", len(f.m), authTableMax)
	}
	f.fail("k", now)
	f.fail("k", now)
	if spent, d := f.spent("k", now); !spent || d <= 0 || d > time.Second {
		t.Fatalf("after its burst: spent %v, retry %v", spent, d)
	}
	if spent, _ := f.spent("k", now.Add(time.Second)); spent {
		t.Fatal("still spent a refill later")
	}
}

func TestInfoWithoutNodes(t *testing.T) {
	in := "# Server\r\nredis_version:7.0.15\r\ntcp_port:7000\r\nexecutable:/usr/bin/redis-server\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=7003,state=online\r\nslave_read_only:1\r\n\r\n# Nodes\r\nmasters:3\r\nmaster_addrs:127.0.0.1:7000,127.0.0.1:7001\r\n"
	want := "# Server\r\nredis_version:7.0.15\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave_read_only:1\r\n\r\n# Nodes\r\nmasters:3\r\n"
	if got := withoutNodes(in); got != want {
		t.Fatalf("withoutNodes:\n%q\nwant\n%q", got, want)
	}
}

// TestLongCommandName: a name over MaxCommandName is an unknown command, answered as Redis
// answers one (the name cut to 128 bytes), by Serve and by Immediate alike; a name at the
// bound is looked up as usual.
func TestLongCommandName(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{})
	s := r.NewSession("127.0.0.1:1")
	long := strings.Repeat("x", MaxCommandName+1)
	want := "-ERR unknown command '" + strings.Repeat("x", 128) + "', with args beginning with: 'a' \r\n"
	if got := serve(t, r, s, long+" a"); got != want {
		t.Fatalf("Serve: %q, want %q", got, want)
	}
	if got, ok := immediate(r, nil, s, [][]byte{[]byte(long), []byte("a")}); !ok || string(got) != want {
		t.Fatalf("Immediate: %q, want %q", got, want)
	}
	if _, ok := immediate(r, nil, s, [][]byte{[]byte(strings.Repeat("x", MaxCommandName))}); ok {
		t.Fatal("Immediate answered an unknown command within the bound")
	}
}

// TestImmediatePingEcho: PING and ECHO are answered by Immediate as Serve answers them,
// except inside MULTI, before AUTH, and with a wrong argument count, which it leaves to Serve.
func TestImmediatePingEcho(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{})
	s := r.NewSession("127.0.0.1:1")
	for _, cmd := range []string{"PING", "ping hello", "ECHO hi", "Echo x"} {
		var args [][]byte
		for _, f := range strings.Fields(cmd) {
			args = append(args, []byte(f))
		}
		got, ok := immediate(r, []byte("prefix"), s, args)
		if want := "prefix" + serve(t, r, s, cmd); !ok || string(got) != want {
			t.Errorf("%s: %q (%v), want %q", cmd, got, ok, want)
		}
	}
	for _, args := range [][][]byte{{[]byte("echo")}, {[]byte("ping"), []byte("a"), []byte("b")}, {[]byte("get"), []byte("k")}} {
		if _, ok := immediate(r, nil, s, args); ok {
			t.Errorf("%q answered by Immediate", args)
		}
	}
	locked := New(nil, zap.NewNop(), Options{Password: "pw"})
	if _, ok := immediate(locked, nil, locked.NewSession("127.0.0.1:1"), [][]byte{[]byte("ping")}); ok {
		t.Error("a PING before AUTH answered by Immediate, not NOAUTH")
	}
}

// immediate is what a server writes at once for args: the reply, if Classify makes it
// KindImmediate.
func immediate(r *Router, dst []byte, s *Session, args [][]byte) ([]byte, bool) {
	if r.Classify(s, args).Kind != KindImmediate {
		return dst, false
	}
	return r.AppendImmediate(dst, args), true
}
