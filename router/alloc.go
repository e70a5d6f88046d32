package router

import (
	"strconv"
	"strings"
)

// Commands whose arguments say how much memory Redis allocates for them, beyond what the
// arguments themselves hold: SETRANGE key 268435455 x makes a 256 MiB string of one byte of
// input (a master under maxmemory 64mb went to 338 MB, and every buy on it then failed OOM),
// SETBIT and BITFIELD grow a string to their bit offset, and SRANDMEMBER, ZRANDMEMBER and
// HRANDFIELD with a negative count answer that many elements, repeats allowed, whatever the
// key holds (SRANDMEMBER key -5000000 held a master for 2 s). Such a command is refused when
// what it may allocate passes limits.max_alloc_bytes; an app user's scripts are held to the
// same by the meter (internal/luabound, meter.go). Commands whose replies or results are no
// larger than the data they read (GETRANGE, LRANGE, SUNIONSTORE, ...) are not here: Redis's
// maxmemory bounds what they can reach.

// allocating are the commands allocOf reads, lower-cased.
var allocating = map[string]bool{
	"setrange": true, "setbit": true, "bitfield": true,
	"srandmember": true, "zrandmember": true, "hrandfield": true,
}

// randElementBytes is what one element of a random command's reply is taken to cost.
const randElementBytes = 64

// allocOf is what args, a command named by name (lower-cased), may make Redis allocate, in
// bytes; 0 for a command not in allocating, or arguments Redis will refuse anyway.
func allocOf(name string, args [][]byte) int64 {
	switch name {
	case "setrange":
		if len(args) == 4 {
			if off, err := strconv.ParseInt(string(args[2]), 10, 64); err == nil && off >= 0 {
				return off + int64(len(args[3]))
			}
		}
	case "setbit":
		if len(args) == 4 {
			if off, err := strconv.ParseUint(string(args[2]), 10, 64); err == nil {
				return int64(off/8 + 1)
			}
		}
	case "bitfield":
		return bitfieldAlloc(args)
	case "srandmember", "zrandmember", "hrandfield":
		if len(args) >= 3 {
			if n, err := strconv.ParseInt(string(args[2]), 10, 64); err == nil && n < 0 {
				if n < -(1 << 40) {
					return 1 << 62
				}
				return -n * randElementBytes
			}
		}
	}
	return 0
}

// bitfieldAlloc is the byte past the furthest bit BITFIELD's SET and INCRBY may write:
// offset N or #N (N times the type's width), plus the width.
func bitfieldAlloc(args [][]byte) int64 {
	var most int64
	for i := 2; i+2 < len(args); i++ {
		op := strings.ToLower(string(args[i]))
		if op != "set" && op != "incrby" {
			continue
		}
		width, err := strconv.ParseInt(string(args[i+1][min(1, len(args[i+1])):]), 10, 64)
		if err != nil || width < 1 || width > 64 {
			continue // Redis refuses the type
		}
		off := string(args[i+2])
		scale := int64(1)
		if strings.HasPrefix(off, "#") {
			off, scale = off[1:], width
		}
		n, err := strconv.ParseInt(off, 10, 64)
		if err != nil || n < 0 || n > (1<<62)/scale {
			continue
		}
		most = max(most, (n*scale+width)/8+1)
	}
	return most
}

// allocError is the refusal of a command that may allocate more than limits.max_alloc_bytes.
func allocError(name string, n int64, limit int) error {
	return respError("ERR '" + name + "' may make Redis allocate " + strconv.FormatInt(n, 10) +
		" bytes, over limits.max_alloc_bytes (" + strconv.Itoa(limit) + "): one command may not take its master past its maxmemory")
}
