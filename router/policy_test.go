package router

import (
	"strings"
	"testing"

	"go.uber.org/zap"

	"seckill-proxy/sale"
)

// TestPass: what pass lets through and what it refuses, for an app user and an admin, with and
// without redis.admin_allow, on a router with no upstream (so no restricted pass-through user:
// every script refused).
func TestPass(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{AdminAllow: []string{"FlushAll", "script", "slowlog", "sync", "PSYNC"}})
	saleKey := string(sale.KeysFor("phone").Stock)
	tests := []struct {
		cmd      string
		admin    bool
		wantErr  string // "" passes; else a prefix of the error
		protects bool   // the error must be ProtectedKeysError
	}{
		{cmd: "GET a", wantErr: ""},
		{cmd: "SET a b", wantErr: ""},
		{cmd: "flushall", wantErr: "ERR 'flushall' is refused by seckill-proxy"},
		{cmd: "FLUSHALL", admin: true, wantErr: ""},
		{cmd: "FLUSHDB", admin: true, wantErr: "ERR 'flushdb' is refused by seckill-proxy"},
		{cmd: "CONFIG SET maxmemory 1", admin: true, wantErr: "ERR 'config' is refused"},
		{cmd: "SLOWLOG GET", wantErr: "ERR 'slowlog' is refused"},
		{cmd: "SLOWLOG GET", admin: true, wantErr: ""},
		{cmd: "MIGRATE h 1 k 0 1", admin: true, wantErr: "ERR 'migrate' is refused"},
		{cmd: "SYNC", admin: true, wantErr: ReplicationError},
		{cmd: "psync ? -1", admin: true, wantErr: ReplicationError},
		{cmd: "SYNC", wantErr: ReplicationError},
		{cmd: "SCRIPT KILL", wantErr: "ERR 'script|kill' is refused"},
		{cmd: "FUNCTION KILL", wantErr: "ERR 'function' is refused"},
		{cmd: "SCRIPT KILL", admin: true, wantErr: ""},
		{cmd: "FUNCTION KILL", admin: true, wantErr: ""},
		{cmd: "SCRIPT FLUSH", wantErr: "ERR 'script|flush' is refused"},
		{cmd: "SCRIPT FLUSH", admin: true, wantErr: ""},
		{cmd: "script Exists abc", wantErr: ""},
		{cmd: "EVAL return 0", wantErr: noScriptsError},
		{cmd: "evalsha abc 0", admin: true, wantErr: noScriptsError},
		{cmd: "FCALL f 0", wantErr: noScriptsError},
		{cmd: "PUBLISH " + sale.EventsChannel + " x", admin: true, wantErr: ProtectedChannelError},
		{cmd: "SPUBLISH " + sale.EventsChannel + " x", wantErr: ProtectedChannelError},
		{cmd: "PUBLISH " + sale.OutcomeChannelPrefix + "phone/u1 x", wantErr: OutcomeChannelPublishError},
		{cmd: "PUBLISH news x", wantErr: ""},
		{cmd: "SET " + saleKey + " 1", protects: true},
		{cmd: "DEL a " + saleKey, admin: true, protects: true},
		{cmd: "SADD " + sale.SalesKey + " x", protects: true},
	}
	for _, tc := range tests {
		s := r.NewSession("127.0.0.1:1")
		s.Admin = tc.admin
		args := argsOf(tc.cmd)
		cl := r.Identify(args)
		_, err := r.pass(s, &cl, args)
		got := ""
		if err != nil {
			got = err.Error()
		}
		switch {
		case tc.protects:
			if got != ProtectedKeysError {
				t.Errorf("%q (admin %v): %q, want the protected keys' error", tc.cmd, tc.admin, got)
			}
		case tc.wantErr == "" && got != "":
			t.Errorf("%q (admin %v): refused with %q, want it passed", tc.cmd, tc.admin, got)
		case tc.wantErr != "" && !strings.HasPrefix(got, tc.wantErr):
			t.Errorf("%q (admin %v): %q, want %q", tc.cmd, tc.admin, got, tc.wantErr)
		}
	}
}

// TestPolicyNames: every command a table of pass names is in policyNames, the one lookup that
// sends a command to passSpecial; a command in none of them is not.
func TestPolicyNames(t *testing.T) {
	var names []string
	for k := range refused {
		names = append(names, k)
	}
	for _, m := range []map[string]bool{unsupported, scripting, publishing} {
		for k := range m {
			names = append(names, k)
		}
	}
	for _, n := range append(names, "script") {
		if !policyNames[n] {
			t.Errorf("%s is in a table of pass, not in policyNames", n)
		}
	}
	for _, n := range []string{"get", "set", "blpop", "multi", "seckill.buy"} {
		if policyNames[n] {
			t.Errorf("%s is in policyNames", n)
		}
	}
}

// argsOf splits a command on spaces.
func argsOf(cmd string) [][]byte {
	var args [][]byte
	for _, f := range strings.Fields(cmd) {
		args = append(args, []byte(f))
	}
	return args
}
