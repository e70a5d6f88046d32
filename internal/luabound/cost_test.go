package luabound

import (
	"context"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// TestCostRefuses: each way an app user froze or bloated a master with a script the old
// analyser accepted is refused, naming the construct and its line.
func TestCostRefuses(t *testing.T) {
	for name, c := range map[string][2]string{
		"nested literal loops":         {"for i=1,1048576 do\nfor j=1,1048576 do redis.call('incr', KEYS[1]) end end", "line 2: this costs up to"},
		"a literal loop of calls":      {"for i = 1, 1000000 do redis.call('INCR', KEYS[1]) end", "over the budget"},
		"a pattern that backtracks":    {"return string.find(string.rep('a',1048576), '.-.-.-.-b')", "over the budget"},
		"backtracking over a reply":    {"local v = redis.call('GET', KEYS[1])\nreturn v:find('(.-)x(.-)y')", "line 2: string.find"},
		"backtracking, library form":   {"return string.match(redis.call('GET', KEYS[1]), '%d+x')", "can backtrack"},
		"a pattern of a value":         {"return string.find(ARGV[1], ARGV[2])", "not a literal"},
		"a reply matched on each step": {"local v = redis.call('GET', KEYS[1])\nfor i = 1, 1000 do v:find('x') end", "1000 times"},
		"a reply matched per input":    {"local v = redis.call('GET', KEYS[1])\nfor i = 1, #ARGV do v:find('x') end", "as the input is long"},
		"a reply matched per call":     {"local v = redis.call('GET', KEYS[1])\nlocal function f() return v:find('x') end\nreturn f()", "each call of a function"},
		"doubling":                     {"local s = string.rep('x', 1048576)\nfor i=1,20 do s = s .. s end", "line 2: s doubles"},
		"quadratic growth":             {"local s = ''\nfor i=1,1048576 do s = s .. 'a' end", "over the budget"},
		"growth over a reply":          {"local s = ''\nfor _, k in ipairs(redis.call('HKEYS', KEYS[1])) do s = s .. k end", "table.concat"},
		"growth by a reply":            {"local s, v = '', redis.call('GET', KEYS[1])\nfor i = 1, 10 do s = s .. v end", "no bound"},
		"a big literal string":         {"local s = string.rep('x', 1048576)\nreturn s .. s .. s .. s .. s .. s .. s .. s .. s", "over 8388608"},
		"string.rep too big":           {"return string.rep('abcdefghij', 1048576)", "string.rep builds"},
		"KEYS":                         {"return redis.call('KEYS', '*')", "KEYS"},
		"KEYS through pcall":           {"return pcall(redis.call, 'keys', '*')", "KEYS"},
		"a callback's recursion":       {"local function f(s) return pcall(string.gsub, s, '.', f) end\nreturn f(ARGV[1])", "recursion"},
		"mutual callbacks":             {"local g\nlocal function f() return string.gsub(ARGV[1], '.', g) end\ng = function() return string.gsub(ARGV[2], '.', f) end\nreturn f()", "recursion"},
		"a callback parameter":         {"local function f(s, h) return string.gsub(s, '.', h) end\nreturn f(ARGV[1], f)", "recursion"},
		"a walker in a literal loop":   {"for i = 1, 100 do redis.call('SMEMBERS', KEYS[1]) end", "over the budget"},
		"a walker per reply element":   {"for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do\nredis.call('HGETALL', k) end", "line 2: this costs"},
		"a walker in a function":       {"local function f(k) return redis.call('LRANGE', k, 0, -1) end\nfor _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do f(k) end", "each element of a reply"},
		"a command named by a value":   {"for i = 1, 100 do redis.call(ARGV[1], KEYS[1]) end", "over the budget"},
		"a wide literal range":         {"for i = 1, 100 do redis.call('ZRANGE', KEYS[1], 0, 100000) end", "over the budget"},
		"allow-oom":                    {"#!lua flags=no-writes,allow-oom\nreturn redis.call('set', KEYS[1], ARGV[1])", "allow-oom"},
		"gsub's output":                {"return string.gsub(string.rep('x', 100000), '.', string.rep('y', 1000))", "over 8388608"},
	} {
		_, err := Analyse(c[0])
		if err == nil || !strings.Contains(err.Error(), c[1]) {
			t.Errorf("%s: %v; want a refusal naming %q", name, err, c[1])
		}
	}
}

// TestCostPerCall: what the input decides is decided for each call: a backtracking pattern
// over an argument runs on a short one and is refused on a long one; a script that walks its
// input runs on any input, since it costs what a command as long would.
func TestCostPerCall(t *testing.T) {
	args := func(n, size int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = []byte(strings.Repeat("a", size))
		}
		return out
	}
	for _, c := range []struct {
		name, src  string
		keys, argv [][]byte
		ok         bool
	}{
		{"backtracking over a short argument", "return string.find(ARGV[1], '.-.-.-.-b')", nil, args(1, 12), true},
		{"backtracking over a long argument", "return string.find(ARGV[1], '.-.-.-.-b')", nil, args(1, 1<<20), false},
		{"a walk of a million arguments", "for i = 1, #ARGV do redis.call('sadd', KEYS[1], ARGV[i]) end", args(1, 8), args(1<<20, 8), true},
		{"nested walks of a few", "for i = 1, #KEYS do for j = 1, #ARGV do redis.call('sadd', KEYS[i], ARGV[j]) end end", args(10, 8), args(100, 8), true},
		{"nested walks of many", "for i = 1, #KEYS do for j = 1, #ARGV do redis.call('sadd', KEYS[i], ARGV[j]) end end", args(10000, 8), args(10000, 8), false},
		{"narrow ranges in a loop", "for i = 1, #ARGV do redis.call('lrange', KEYS[1], 0, 9) redis.call('zrangebyscore', KEYS[2], 0, 1, 'LIMIT', 0, 10) end", args(2, 8), args(1000, 8), true},
		{"a few walkers", "local a = redis.call('smembers', KEYS[1])\nlocal b = redis.call('hgetall', KEYS[2])\nreturn {a, b}", args(2, 8), nil, true},
		{"a linear pattern over a long argument", "return string.find(ARGV[1], '^%d+$')", nil, args(1, 64<<20), true},
	} {
		b, err := Analyse(c.src)
		if err != nil {
			t.Errorf("%s: refused outright: %v", c.name, err)
			continue
		}
		if err := b.Allows(c.keys, c.argv); (err == nil) != c.ok {
			t.Errorf("%s: Allows = %v, want allowed %v (bound %v)", c.name, err, c.ok, b)
		}
	}
}

// TestPatternCost: a pattern's degree is its repetitions that something able to fail
// follows, plus one for the starts tried when it is not anchored.
func TestPatternCost(t *testing.T) {
	for _, c := range []struct {
		p      string
		gmatch bool
		degree int
	}{
		{"abc", false, 1},
		{"^abc", false, 1},
		{"%d+", false, 1},
		{"^%d+$", false, 1},
		{"%d+x", false, 2},
		{".-.-.-.-b", false, 5},
		{"^(.-)x(.-)y", false, 2},
		{"[^,]+", true, 1},
		{"^%d+x", true, 2}, // gmatch: ^ anchors nothing
		{"%b()x", false, 2},
		{"(a*)%1", false, 2},
		{"%f[%w]%w+", false, 1},
		{"[%]]*x", false, 2},
	} {
		pc, err := patternCost(c.p, c.gmatch)
		if err != nil || pc.degree != c.degree {
			t.Errorf("%q (gmatch %v): degree %d, %v; want %d", c.p, c.gmatch, pc.degree, err, c.degree)
		}
	}
	for _, p := range []string{"%", "[abc", "%b(", strings.Repeat("a?", maxPatternBranches+1)} {
		if _, err := patternCost(p, false); err == nil {
			t.Errorf("%q read as a pattern", p)
		}
	}
}

// TestFuelCharges: a fueled body takes what it does from the fuel, not one step: a Redis
// call's worth for a body that calls Redis.
func TestFuelCharges(t *testing.T) {
	out, _, err := Fuel("while true do redis.call('incr', KEYS[1]) end", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, fuelCounter+"="+fuelCounter+"-35 ") {
		t.Fatalf("a body of one call is not charged 35 units:\n%s", out)
	}
	for name, c := range map[string][2]string{
		"KEYS in a loop":                   {"while true do redis.call('KEYS', '*') end", "KEYS"},
		"growth in a fueled loop":          {"local s = ''\nwhile true do s = s .. 'x' end", "table.concat"},
		"a reply matched on each step":     {"local v = redis.call('GET', KEYS[1])\nwhile true do v:find('x') end", "no bound"},
		"backtracking over a reply, fuel":  {"while true do string.find(redis.call('GET', KEYS[1]), '.-x') end", "can backtrack"},
		"string.rep of a value, with fuel": {"while true do string.rep('x', ARGV[1]) end", "string.rep"},
	} {
		if _, _, err := Fuel(c[0], 1000); err == nil || !strings.Contains(err.Error(), c[1]) {
			t.Errorf("%s: %v; want a refusal naming %q", name, err, c[1])
		}
	}
	// Redisson's read lock unlock runs fueled, and a call of it with its usual keys is allowed.
	_, b, err := Fuel(readUnlock, 1<<22)
	if err != nil {
		t.Fatal(err)
	}
	keys := [][]byte{[]byte("lock"), []byte("redisson_rwlock:{lock}"), []byte("{lock}:UUID:1:rwlock_timeout"), []byte("{lock}")}
	argv := [][]byte{[]byte("0"), []byte("8743c9c0-0795-4907-87fd-6c719a6b4586:1"), []byte("publish")}
	if err := b.Allows(keys, argv); err != nil {
		t.Errorf("Redisson's read unlock: %v", err)
	}
}

// FuzzCostBound: for every script the model bounds, running it (in gopher-lua, with Redis's
// replies stood in for) takes no more loop steps, function calls and Redis calls than the
// bound charges for them, for inputs of the sizes the fuzzer picks.
func FuzzCostBound(f *testing.F) {
	for _, s := range []string{
		"for i = 1, #ARGV, 2 do redis.call('hset', KEYS[1], ARGV[i], ARGV[i + 1]) end",
		"for i = 1, #KEYS do for j = i, #ARGV do redis.call('sadd', KEYS[i], ARGV[j]) end end",
		"local n = (#ARGV - 3) / 4\nfor b = 1, n do redis.call('incr', KEYS[1]) end",
		"for i = 10, 1, -1 do redis.call('rpush', KEYS[1], i) end",
		"for w in string.gmatch(ARGV[1], '%S+') do redis.call('sadd', KEYS[1], w) end",
		"local function add(k, v) return redis.call('incrby', k, tonumber(v)) end\nfor i = 1, #KEYS do add(KEYS[i], ARGV[i]) end",
		"local out = {}\nfor i = 1, #ARGV do out[#out + 1] = ARGV[i] end\nreturn out",
		"for i = 1, 300 do for j = 1, 300 do end end",
		"return (string.gsub(ARGV[1], '.', function(c) return c .. c end))",
	} {
		f.Add(s, uint8(3), uint8(5))
	}
	f.Fuzz(func(t *testing.T, src string, n, size uint8) {
		b, err := Analyse(src)
		if err != nil || strings.HasPrefix(src, "#!") || strings.HasPrefix(src, "\uFEFF") {
			return // the shebang line and the byte order mark are not Lua that gopher-lua runs
		}
		c, s := int(n%32), int(size%32)
		if b.Cost(c, s) > 1e6 {
			return
		}
		counted := countedScript(t, src)
		steps, calls := run(t, counted, c, s)
		if spent := float64(steps + callUnits*calls); spent > b.Cost(c, s) {
			t.Fatalf("%q with %d arguments of %d bytes: %d steps and %d calls (%v units), over its bound %v = %v", src, c, s, steps, calls, spent, b, b.Cost(c, s))
		}
	})
}

// countedScript is src with a step counted first thing in every loop and function body.
func countedScript(t *testing.T, src string) string {
	edits, err := editsOf(src, false)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	last := 0
	for _, e := range edits {
		out.WriteString(src[last:e.at])
		out.WriteString(" steps_ = steps_ + 1 ")
		last = e.at
	}
	out.WriteString(src[last:])
	return out.String()
}

// run runs src in gopher-lua with c keys and c arguments of s bytes, redis.call answering a
// short string: the steps counted and the calls made.
func run(t *testing.T, src string, c, s int) (steps, calls int) {
	L := lua.NewState()
	defer L.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	L.SetContext(ctx)
	keys, argv := L.NewTable(), L.NewTable()
	for i := 1; i <= c; i++ {
		keys.RawSetInt(i, lua.LString(strings.Repeat("k", s)))
		argv.RawSetInt(i, lua.LString(strings.Repeat("7", s)))
	}
	L.SetGlobal("KEYS", keys)
	L.SetGlobal("ARGV", argv)
	L.SetGlobal("steps_", lua.LNumber(0))
	redis := L.NewTable()
	call := L.NewFunction(func(L *lua.LState) int {
		calls++
		L.Push(lua.LString("OK"))
		return 1
	})
	redis.RawSetString("call", call)
	redis.RawSetString("pcall", call)
	L.SetGlobal("redis", redis)
	err := L.DoString(src)
	if ctx.Err() != nil {
		t.Fatalf("%q ran for over 5 s", src)
	}
	_ = err // a script that fails midway has still spent what it did
	return int(lua.LVAsNumber(L.GetGlobal("steps_"))), calls
}
