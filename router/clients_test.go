package router

import (
	"strings"
	"testing"

	"go.uber.org/zap"

	"seckill-proxy/guard"
)

// What CLIENT promises of the proxy's own clients, with no Redis behind it.

func TestClientArityAndReply(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{})
	tests := []struct{ cmd, want string }{
		{"CLIENT GETNAME x", "-ERR wrong number of arguments for 'client|getname' command\r\n"},
		{"CLIENT ID x", "-ERR wrong number of arguments for 'client|id' command\r\n"},
		{"CLIENT INFO x", "-ERR wrong number of arguments for 'client|info' command\r\n"},
		{"CLIENT SETINFO LIB-NAME", "-ERR wrong number of arguments for 'client|setinfo' command\r\n"},
		{"CLIENT NO-EVICT", "-ERR wrong number of arguments for 'client|no-evict' command\r\n"},
		{"CLIENT NO-EVICT maybe", "-ERR syntax error\r\n"},
		{"CLIENT NO-EVICT on", "+OK\r\n"},
		{"CLIENT REPLY", "-ERR wrong number of arguments for 'client|reply' command\r\n"},
		{"CLIENT REPLY sometimes", "-ERR syntax error\r\n"},
		{"CLIENT REPLY on", "+OK\r\n"},
		{"CLIENT KILL", "-ERR wrong number of arguments for 'client|kill' command\r\n"},
		{"CLIENT KILL id 1 type", "-ERR syntax error\r\n"},
		{"CLIENT KILL id 0", "-ERR client-id should be greater than 0\r\n"},
		{"CLIENT KILL type robot", "-ERR Unknown client type 'robot'\r\n"},
		{"CLIENT KILL skipme perhaps", "-ERR syntax error\r\n"},
		{"CLIENT KILL maxage soon", "-ERR value is not an integer or out of range\r\n"},
		{"CLIENT KILL colour red", "-ERR syntax error\r\n"},
		{"CLIENT TRACKING on", "-ERR CLIENT TRACKING is not supported through seckill-proxy: " + unsupportedClient["tracking"] + "\r\n"},
	}
	for _, tt := range tests {
		if got := serve(t, r, r.NewSession("127.0.0.1:1"), tt.cmd); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.cmd, got, tt.want)
		}
	}

	// SETINFO and SETNAME show in CLIENT INFO; GETNAME answers the name.
	s := r.NewSession("127.0.0.1:2")
	got := serve(t, r, s, "CLIENT SETNAME shop-1", "CLIENT SETINFO lib-name redisson", "CLIENT SETINFO LIB-VER 3.27", "CLIENT GETNAME", "CLIENT INFO")
	for _, want := range []string{"+OK\r\n+OK\r\n+OK\r\n$6\r\nshop-1\r\n", " name=shop-1 ", "lib-name=redisson", "lib-ver=3.27"} {
		if !strings.Contains(got, want) {
			t.Errorf("CLIENT SETNAME/SETINFO/GETNAME/INFO: %q lacks %q", got, want)
		}
	}

	// REPLY OFF answers nothing until REPLY ON; SKIP drops the next reply only.
	s = r.NewSession("127.0.0.1:3")
	if got, want := serve(t, r, s, "CLIENT REPLY OFF", "PING", "CLIENT REPLY ON", "PING"), "+OK\r\n+PONG\r\n"; got != want {
		t.Errorf("REPLY OFF then ON: got %q, want %q", got, want)
	}
	if got, want := serve(t, r, s, "CLIENT REPLY SKIP", "ECHO a", "ECHO b"), "$1\r\nb\r\n"; got != want {
		t.Errorf("REPLY SKIP: got %q, want %q", got, want)
	}
}

// TestClientKillFilters: each filter narrows the clients killed, the caller is skipped
// unless SKIPME no, and a client is killed once.
func TestClientKillFilters(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{})
	killed := map[string]int{}
	open := func(remote, laddr string) *Session {
		s := r.NewSession(remote)
		s.SetConn(laddr, 7, func() { killed[remote]++ })
		return s
	}
	admin := open("127.0.0.1:100", "127.0.0.1:6380")
	open("127.0.0.1:101", "127.0.0.1:6380")
	open("127.0.0.1:102", "127.0.0.1:6381")
	tests := []struct {
		cmd, want string
		gone      []string
	}{
		{"CLIENT KILL laddr 127.0.0.1:6381", ":1\r\n", []string{"127.0.0.1:102"}},
		{"CLIENT KILL laddr 127.0.0.1:6381", ":0\r\n", nil}, // killed once only
		{"CLIENT KILL type pubsub", ":0\r\n", nil},
		{"CLIENT KILL type master", ":0\r\n", nil},
		{"CLIENT KILL addr 127.0.0.1:100", ":0\r\n", nil},                  // itself, skipped
		{"CLIENT KILL user nobody", "-ERR No such user 'nobody'\r\n", nil}, // as Redis answers
		{"CLIENT KILL type normal", ":1\r\n", []string{"127.0.0.1:101"}},
		{"CLIENT KILL addr 127.0.0.1:100 skipme no", ":1\r\n", []string{"127.0.0.1:100"}},
	}
	for _, tt := range tests {
		before := len(killed)
		if got := serve(t, r, admin, tt.cmd); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.cmd, got, tt.want)
		}
		if len(killed)-before != len(tt.gone) {
			t.Errorf("%s: %d more killed, want %v", tt.cmd, len(killed)-before, tt.gone)
		}
		for _, g := range tt.gone {
			if killed[g] != 1 {
				t.Errorf("%s: %s killed %d times, want once", tt.cmd, g, killed[g])
			}
		}
	}
}

// TestStatusWaitShare: a user, or a client address, that has its share of the proxy's waits
// waiting gets BUSY for one more SECKILL.STATUS ... WAIT, naming the setting, before the
// guard is asked; another user at another address is not touched.
func TestStatusWaitShare(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{WaitShare: 2})
	s := r.NewSession("10.0.0.1:5000")
	keys := guard.ShareKeys(s.User, s.Remote)
	r.waitShares.Take(keys)
	r.waitShares.Take(keys)
	got := serve(t, r, s, "SECKILL.STATUS phone u1 WAIT 1000")
	if !strings.HasPrefix(got, "-BUSY") || !strings.Contains(got, "limits.client_share") {
		t.Fatalf("a third wait: %q", got)
	}
	if !r.waitShares.Take(guard.ShareKeys("shop", "10.0.0.2:1")) {
		t.Fatal("another user at another address was refused")
	}
}
