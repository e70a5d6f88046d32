package upstream

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// commandEntry is one entry of Redis's COMMAND reply: name, arity, flags, first key, last key,
// step, and (at index 9) the subcommands.
func commandEntry(name string, arity int64, flags []string, first, last, step int64, subs ...[]any) []any {
	fl := make([]any, len(flags))
	for i, f := range flags {
		fl[i] = f
	}
	e := []any{name, arity, fl, first, last, step, []any{}, []any{}, []any{}}
	if len(subs) > 0 {
		sub := make([]any, len(subs))
		for i, s := range subs {
			sub[i] = s
		}
		e = append(e, sub)
	}
	return e
}

// tableCluster is a Cluster with a command table read from a COMMAND reply of a few commands,
// as Redis 7.0 gives them.
func tableCluster() *Cluster {
	reply := []any{
		commandEntry("GET", 2, []string{"readonly", "fast"}, 1, 1, 1),
		commandEntry("SET", -3, []string{"write", "denyoom"}, 1, 1, 1),
		commandEntry("MSET", -3, []string{"write", "denyoom"}, 1, -1, 2),
		commandEntry("MGET", -2, []string{"readonly", "fast"}, 1, -1, 1),
		commandEntry("EVAL", -3, []string{"noscript", "movablekeys"}, 0, 0, 0),
		commandEntry("XINFO", -2, nil, 0, 0, 0,
			commandEntry("xinfo|stream", -3, []string{"readonly"}, 2, 2, 1),
			commandEntry("xinfo|help", 2, []string{"loading", "stale"}, 0, 0, 0)),
		commandEntry("OBJECT", -2, nil, 0, 0, 0,
			commandEntry("object|freq", 3, []string{"readonly"}, 2, 2, 1)),
		[]any{"broken"}, // too short: skipped
	}
	return tableClusterWith(reply...)
}

// tableClusterWith is a Cluster whose command table is read from the entries given.
func tableClusterWith(entries ...any) *Cluster {
	c := &Cluster{shared: &shared{}}
	c.info.Store(newCommandTable(parseCommands(entries)))
	return c
}

func argsOf(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}

func keysString(keys [][]byte) string { return string(bytes.Join(keys, []byte(","))) }

// TestParseCommands: names are lower-cased, subcommands are "container|sub", flags and key
// positions are kept, and an entry too short to read is skipped.
func TestParseCommands(t *testing.T) {
	info := tableCluster().info.Load().info
	names := make([]string, 0, len(info))
	for n := range info {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"eval", "get", "mget", "mset", "object", "object|freq", "set", "xinfo", "xinfo|help", "xinfo|stream"}
	if !slices.Equal(names, want) {
		t.Fatalf("table %v, want %v", names, want)
	}
	if g := info["get"]; !g.ReadOnly || g.Arity != 2 || g.FirstKeyPos != 1 {
		t.Errorf("get: %+v", g)
	}
	if m := info["mset"]; m.LastKeyPos != -1 || m.StepCount != 2 || m.ReadOnly {
		t.Errorf("mset: %+v", m)
	}
}

// TestDescribe: what the policy is told of a command, from the table: read-only or not, its
// keys at their positions (MSET's every other argument), and "any argument may be a key" for
// what the table cannot place (movable keys, an unknown command or subcommand, no table yet).
func TestDescribe(t *testing.T) {
	c := tableCluster()
	cases := []struct {
		args     string
		readOnly bool
		keys     string
		anyArg   bool
	}{
		{"GET k", true, "k", false},
		{"get k", true, "k", false},
		{"SET k v EX 10", false, "k", false},
		{"MSET a 1 b 2 c 3", false, "a,b,c", false},
		{"MGET a b c", true, "a,b,c", false},
		{"EVAL s 1 k", false, "", true},
		{"XINFO STREAM s", true, "", false},
		{"xinfo help", false, "", false},
		{"XINFO NOSUCH s", false, "", true},
		{"NOSUCH a b", false, "", true},
		{"MSET a", false, "a", false},
		{"GET", true, "", false},
	}
	for _, tc := range cases {
		d := c.Describe(argsOf(tc.args))
		if d.ReadOnly != tc.readOnly || keysString(d.Keys) != tc.keys || d.AnyArg != tc.anyArg {
			t.Errorf("%q: read-only %v keys %q any %v; want %v %q %v", tc.args, d.ReadOnly, keysString(d.Keys), d.AnyArg, tc.readOnly, tc.keys, tc.anyArg)
		}
	}
	if d := (&Cluster{shared: &shared{}}).Describe(argsOf("GET k")); !d.AnyArg {
		t.Errorf("with no table yet: %+v, want any argument", d)
	}
	if d := c.Describe(nil); !d.AnyArg {
		t.Errorf("an empty command: %+v, want any argument", d)
	}
}

// TestCommandKeys: the keys of commands whose keys move, from their numkeys or STREAMS
// argument; a numkeys that is not a count, is negative, or counts past the arguments names no
// key.
func TestCommandKeys(t *testing.T) {
	cases := []struct{ args, keys string }{
		{"eval s 2 a b x", "a,b"},
		{"evalsha h 0 x", ""},
		{"fcall f 1 k a", "k"},
		{"eval s -1 a", ""},
		{"eval s x a", ""},
		{"eval s 3 a b", ""},
		{"eval s", ""},
		{"zunion 2 a b WEIGHTS 1 2", "a,b"},
		{"lmpop 1 l LEFT", "l"},
		{"blmpop 0 2 a b LEFT", "a,b"},
		{"zunionstore dst 2 a b", "dst,a,b"},
		{"zunionstore", ""},
		{"xread COUNT 1 STREAMS s1 s2 0 0", "s1,s2"},
		{"xreadgroup GROUP g c streams s >", "s"},
		{"xread COUNT 1", ""},
	}
	for _, tc := range cases {
		args := argsOf(tc.args)
		if got := keysString(commandKeys(string(args[0]), nil, args)); got != tc.keys {
			t.Errorf("%q: keys %q, want %q", tc.args, got, tc.keys)
		}
	}
}

// FuzzCommandKeys: whatever the arguments, the keys found are arguments of the command (never
// the name), and finding them does not panic.
func FuzzCommandKeys(f *testing.F) {
	for _, s := range []string{"eval s 2 a b", "xread STREAMS a b 0 0", "zunionstore d 1 a", "mset a 1 b 2", "get k", "eval s 99999999999999999999 a"} {
		f.Add(s)
	}
	c := tableCluster()
	f.Fuzz(func(t *testing.T, s string) {
		args := argsOf(s)
		if len(args) == 0 {
			return
		}
		name := strings.ToLower(string(args[0]))
		ci := c.info.Load().info[name]
		for _, k := range commandKeys(name, ci, args) {
			if !slices.ContainsFunc(args[1:], func(a []byte) bool { return bytes.Equal(a, k) }) {
				t.Fatalf("%q: key %q is not one of its arguments", s, k)
			}
		}
		_ = c.Describe(args)
	})
}
