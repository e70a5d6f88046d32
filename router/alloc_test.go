package router

import (
	"strings"
	"testing"

	"go.uber.org/zap"
)

func words(s string) [][]byte {
	var out [][]byte
	for _, w := range strings.Fields(s) {
		out = append(out, []byte(w))
	}
	return out
}

// TestAllocOf: what each allocating command's arguments make Redis allocate.
func TestAllocOf(t *testing.T) {
	for cmd, want := range map[string]int64{
		"SETRANGE k 268435455 x":                   268435456,
		"SETRANGE k 10 hello":                      15,
		"SETRANGE k -1 x":                          0, // Redis refuses it
		"SETBIT k 4294967295 1":                    536870912,
		"SETBIT k 7 1":                             1,
		"BITFIELD k SET u8 #1000 1":                1002,
		"BITFIELD k GET u8 0 INCRBY i64 800000 1":  100009,
		"BITFIELD k SET u99 0 1":                   0, // Redis refuses the type
		"SRANDMEMBER k -5000000":                   5000000 * randElementBytes,
		"SRANDMEMBER k 5000000":                    0, // at most the set
		"ZRANDMEMBER k -10 WITHSCORES":             10 * randElementBytes,
		"HRANDFIELD k -9223372036854775808":        1 << 62,
		"SRANDMEMBER k":                            0,
		"BITFIELD k SET u8 #9223372036854775807 1": 0,
	} {
		args := words(cmd)
		if got := allocOf(strings.ToLower(string(args[0])), args); got != want {
			t.Errorf("%s: %d, want %d", cmd, got, want)
		}
	}
}

// TestAllocRefused: a command that may make Redis allocate more than limits.max_alloc_bytes is
// refused, for any user, naming the setting; one below it passes to Redis.
func TestAllocRefused(t *testing.T) {
	r := New(nil, zap.NewNop(), Options{MaxAllocBytes: 1 << 20})
	s := r.NewSession("127.0.0.1:1")
	for _, cmd := range []string{"SETRANGE k 268435455 x", "setbit k 100000000 1", "SRANDMEMBER k -5000000", "BITFIELD k SET u8 #2000000 1"} {
		err := r.passSpecial(s, []byte(strings.ToLower(strings.Fields(cmd)[0])), words(cmd))
		if err == nil || !strings.Contains(err.Error(), "limits.max_alloc_bytes") {
			t.Errorf("%s: %v, want a refusal naming limits.max_alloc_bytes", cmd, err)
		}
	}
	for _, cmd := range []string{"SETRANGE k 1000 x", "SRANDMEMBER k -100", "SRANDMEMBER k 100000000"} {
		if err := r.passSpecial(s, []byte(strings.ToLower(strings.Fields(cmd)[0])), words(cmd)); err != errNotSpecial {
			t.Errorf("%s: %v, want it passed on", cmd, err)
		}
	}
}

// FuzzAllocOf: any arguments are read without a panic, and never as a negative allocation.
func FuzzAllocOf(f *testing.F) {
	for _, s := range []string{"setrange k 10 x", "bitfield k set u8 #10 1", "bitfield k set i 1 1", "srandmember k -1", "setbit k 18446744073709551615 1", "bitfield k incrby u64 #144115188075855871 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		args := words(cmd)
		if len(args) == 0 {
			return
		}
		if n := allocOf(strings.ToLower(string(args[0])), args); n < 0 {
			t.Fatalf("%q: %d", cmd, n)
		}
	})
}
