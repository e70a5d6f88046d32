package luabound

import (
	"errors"
	"strings"
	"testing"
)

// TestCheck: scripts whose loops walk their input or count to a literal pass; scripts that
// loop on a value, or could, are refused with the line and the reason.
func TestCheck(t *testing.T) {
	bounded := map[string]string{
		"no loop": `return redis.call('GET', KEYS[1])`,
		"Redisson's lock": `if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end;
return redis.call('pttl', KEYS[1]);`,
		"over ARGV in pairs":   `for i = 1, #ARGV, 2 do redis.call('hset', KEYS[1], ARGV[i], ARGV[i + 1]) end`,
		"a count from ARGV":    "local n = (#ARGV - 3) / 4\nfor b = 1, n do redis.call('incr', KEYS[1]) end",
		"nested over input":    `for i = 1, #KEYS do for j = i, #ARGV do redis.call('sadd', KEYS[i], ARGV[j]) end end`,
		"a literal":            `for i = 10, 1, -1 do redis.call('rpush', KEYS[1], i) end`,
		"a reply":              `for _, k in ipairs(redis.call('hkeys', KEYS[1])) do redis.call('del', k) end`,
		"a reply by name":      "local ks = redis.call('smembers', KEYS[1])\nfor i, k in pairs(ks) do redis.call('srem', KEYS[1], k) end",
		"a reply's length":     "local ks = redis.call('lrange', KEYS[1], 0, -1)\nfor i = 1, #ks do redis.call('lpush', KEYS[2], ks[i]) end",
		"decoded":              "local t = cjson.decode(ARGV[1])\nfor k, v in pairs(t) do redis.call('hset', KEYS[1], k, v) end",
		"gmatch":               `for w in string.gmatch(ARGV[1], '%S+') do redis.call('sadd', KEYS[1], w) end`,
		"gmatch method":        `for w in ARGV[1]:gmatch('[^,]+') do redis.call('sadd', KEYS[1], w) end`,
		"next":                 `for k, v in next, ARGV do redis.call('incr', v) end`,
		"a helper":             "local function add(k, v) return redis.call('incrby', k, tonumber(v)) end\nfor i = 1, #KEYS do add(KEYS[i], ARGV[i]) end",
		"pcall of the library": `local ok = pcall(redis.call, 'get', KEYS[1]) return ok`,
		"string methods":       `local s = ARGV[1] return s:sub(1, 3) .. s:upper() .. string.rep('-', 3)`,
		"a shebang":            "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
		"a table built":        "local out = {}\nfor i = 1, #ARGV do out[#out + 1] = ARGV[i] end\nreturn out",
	}
	for name, src := range bounded {
		if err := Check(src); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	unbounded := map[string][2]string{
		"while":                  {`while true do end`, "while loop"},
		"repeat":                 {`repeat redis.call('incr', KEYS[1]) until false`, "repeat loop"},
		"a value's count":        {`for i = 1, tonumber(ARGV[1]) do redis.call('incr', KEYS[1]) end`, "bounds"},
		"a counter from a key":   {"local c = redis.call('hincrby', KEYS[1], ARGV[1], -1)\nfor i = c, 1, -1 do redis.call('pttl', KEYS[2] .. i) end", "bounds"},
		"a huge literal":         {`for i = 1, 1e12 do end`, "bounds"},
		"multiplied":             {`for i = 1, #ARGV * #ARGV do end`, "bounds"},
		"a step of a value":      {`for i = 1, #ARGV, ARGV[1] do end`, "step"},
		"recursion":              {"local function f(n) return f(n) end\nreturn f(1)", "recursion"},
		"mutual recursion":       {"local g\nlocal function f() return g() end\ng = function() return f() end\nreturn f()", "recursion"},
		"a function value":       {"local function f(h) return h(h) end\nreturn f(f)", "recursion"},
		"pcall of itself":        {"local function f() return pcall(f) end\nreturn f()", "recursion"},
		"a table's own method":   {"local t = {}\nfunction t.f() return t.f() end\nreturn t.f()", "recursion"},
		"a built table walked":   {"local t = {1}\nfor i = 1, #ARGV do for _, v in ipairs(t) do end end", "not the arguments"},
		"doubling":               {"local t = {1}\nfor i = 1, #ARGV do local n = #t for j = 1, n do t[#t + 1] = 1 end end", "bounds"},
		"a reply written to":     {"local r = redis.call('keys', '*')\nfor _, v in ipairs(r) do table.insert(r, v) end", "written to"},
		"ARGV grown as walked":   {"for _, v in ipairs(ARGV) do ARGV[#ARGV + 1] = v end", "written to"},
		"KEYS replaced":          {"KEYS = redis.call('keys', '*')\nfor i = 1, #KEYS do KEYS[#KEYS + 1] = 1 end", "bounds"},
		"a reply aliased":        {"local r = redis.call('keys', '*')\nlocal u = r\nfor _, v in ipairs(r) do u[#u + 1] = v end", "written to"},
		"an iterator of its own": {"local function it() return 1 end\nfor x in it do end", "something other than ipairs"},
		"string.rep of a value":  {`return string.rep('x', ARGV[1])`, "string.rep"},
		":rep of a value":        {`return ARGV[1]:rep(ARGV[2])`, ":rep"},
		"loadstring":             {`return loadstring(ARGV[1])()`, "loadstring"},
		"setmetatable":           {`local t = setmetatable({}, {__index = function(t, k) return t[k] end}) return t.x`, "setmetatable"},
		"_G":                     {`return _G['load'](ARGV[1])`, "_G"},
		"goto":                   {"::top:: goto top", "goto"},
		"a syntax error":         {`for i = 1, do end`, "does not parse"},
		"too long":               {strings.Repeat(" ", MaxSource+1), "over"},
		"too many tokens":        {strings.Repeat("redis.call('incr', KEYS[1]) ", 2000), "tokens"},
		"too deep":               {"return " + strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200), "deep"},
		"too deep in blocks":     {strings.Repeat("do ", 101) + strings.Repeat("end ", 101), "deep"},
	}
	for name, c := range unbounded {
		err := Check(c[0])
		if err == nil || !strings.Contains(err.Error(), c[1]) {
			t.Errorf("%s: %v; want a refusal naming %q", name, err, c[1])
		}
	}
}

// FuzzCheck: any text is judged without a panic, a verdict once given is given again, and no
// judgement runs out of its steps (they grow with the script's size: budget.go).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"while true do end", "for i = 1, #ARGV do end", "local function f() return f() end",
		"for _, v in ipairs(redis.call('keys', '*')) do end", "return string.rep('x', 1e9)", "#!lua\nreturn 1", "::a:: goto a",
		"local t = {} t[1] = t", "return (((((", "for i=1,1e6,1e-9 do end",
		"local a0 = 1 local a1 = a0 + a0 local a2 = a1 + a1 for i = 1, a2 do end",
		"local a0 = redis.call('get', KEYS[1]) local a1 = a0 .. a0 local a2 = a1 or a1 return #a2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		a, b := Check(src), Check(src)
		if (a == nil) != (b == nil) {
			t.Fatalf("two verdicts on %q: %v, %v", src, a, b)
		}
		if errors.Is(a, ErrTooComplex) {
			t.Fatalf("%q: %v", src, a)
		}
		if _, _, err := Fuel(src, 1<<20); errors.Is(err, ErrTooComplex) {
			t.Fatalf("fueled, %q: %v", src, err)
		}
	})
}
