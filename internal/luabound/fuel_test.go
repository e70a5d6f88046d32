package luabound

import (
	"strings"
	"testing"
)

// TestFuel: a script that loops on a value is rewritten to count a step in every loop and
// function body, and its text is otherwise kept; what no count bounds, a script that names
// the counter, and text that is not Lua are refused.
func TestFuel(t *testing.T) {
	for name, c := range map[string]struct {
		src   string
		steps int // the steps counted in the text
	}{
		"while":             {`while true do redis.call('incr', KEYS[1]) end`, 1},
		"repeat":            {`repeat local x = 1 until false`, 1},
		"a counter":         {"local c = tonumber(redis.call('hget', KEYS[1], 'n'))\nfor i = c, 1, -1 do redis.call('pttl', KEYS[2] .. i) end", 1},
		"recursion":         {"local function f(n) return f(n) end\nreturn f(1)", 1},
		"nested":            {"local t = {}\nfor k, v in pairs(t) do while false do end end\nt.f = function(a, ...) return a end", 3},
		"a do in a string":  {"local s = 'do repeat function()' while #s > 0 do s = '' end", 1},
		"a long comment":    {"--[==[ while true do end ]==]\nwhile true do end", 1},
		"a shebang":         {"#!lua flags=no-writes\nwhile true do end", 1},
		"a method":          {"local t = {}\nfunction t:m(x) return self end\nwhile t:m(1) do end", 2},
		"Redisson's unlock": {readUnlock, 2},
	} {
		out, _, err := Fuel(c.src, 100)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := strings.Count(out, fuelCounter+"="+fuelCounter+"-"); got != c.steps {
			t.Errorf("%s: %d steps counted, want %d:\n%s", name, got, c.steps, out)
		}
		if strings.HasPrefix(c.src, "#!") && !strings.HasPrefix(out, c.src[:strings.IndexByte(c.src, '\n')+1]) {
			t.Errorf("%s: the shebang line is not the first:\n%s", name, out)
		}
	}
	for name, c := range map[string][2]string{
		"string.rep of a value": {`while true do local s = string.rep('x', ARGV[1]) end`, "string.rep"},
		"load":                  {`while true do loadstring(ARGV[1])() end`, "loadstring"},
		"the counter refilled":  {`__seckill_fuel = 1e9 while true do end`, "__seckill_fuel"},
		"the error replaced":    {`local __seckill_error = print while true do end`, "__seckill_error"},
		"goto":                  {"::top:: goto top", "goto"},
		"not Lua":               {"while true do", "does not parse"},
	} {
		if _, _, err := Fuel(c[0], 100); err == nil || !strings.Contains(err.Error(), c[1]) {
			t.Errorf("%s: %v; want a refusal naming %q", name, err, c[1])
		}
	}
	if _, _, err := Fuel("while true do end", 0); err == nil {
		t.Error("fuel 0 rewrote a script")
	}
}

// readUnlock is Redisson 3.52's read lock unlock script, whose loop runs as many times as a
// counter stored in the lock's hash.
const readUnlock = `local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call(ARGV[3], KEYS[2], ARGV[1]); return 1; end; local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); if (lockExists == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); if (counter == 0) then redis.call('hdel', KEYS[1], ARGV[2]); end;redis.call('del', KEYS[3] .. ':' .. (counter+1)); if (redis.call('hlen', KEYS[1]) > 1) then local maxRemainTime = -3; local keys = redis.call('hkeys', KEYS[1]); for n, key in ipairs(keys) do counter = tonumber(redis.call('hget', KEYS[1], key)); if type(counter) == 'number' then for i=counter, 1, -1 do local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); maxRemainTime = math.max(remainTime, maxRemainTime);end; end; end; if maxRemainTime > 0 then redis.call('pexpire', KEYS[1], maxRemainTime); return 0; end;if mode == 'write' then return 0;end; end; redis.call('del', KEYS[1]); redis.call(ARGV[3], KEYS[2], ARGV[1]); return 1; `

// FuzzFuel: any text is fueled or refused without a panic, and what is fueled counts a step in
// every loop and function body (counted, which parses the result, agrees).
func FuzzFuel(f *testing.F) {
	for _, s := range []string{"while true do end", "repeat until false", "local function f() return f() end",
		"for i = 1, ARGV[1] do end", "local s = [[do]] while s do end", "#!lua\nwhile 1 do end", "--[[ do ]] for i=1,2 do end"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out, _, err := Fuel(src, 10)
		if err != nil {
			return
		}
		w := &stepWalk{}
		if chunk, err := parseScript(out, "fueled"); err != nil {
			t.Fatalf("fueled %q to %q, which does not parse: %v", src, out, err)
		} else if w.stmts(chunk); w.err != nil {
			t.Fatalf("fueled %q to %q: %v", src, out, w.err)
		}
		if _, _, _, err := check(out, true); Check(src) == nil && err != nil {
			t.Fatalf("a bounded script %q fueled to %q that the check refuses", src, out)
		}
	})
}

// TestFuelBounded: a script of many tiny loops is refused rather than fueled past MaxFueled
// (its tokens, past MaxTokens, refuse it first).
func TestFuelBounded(t *testing.T) {
	src := strings.Repeat("do end ", MaxSource/7)
	if _, _, err := Fuel(src, 10); err == nil || !strings.Contains(err.Error(), "tokens") {
		t.Fatalf("a script of %d bytes of do end: %v, want a refusal", len(src), err)
	}
	if out, _, err := Fuel(strings.Repeat("do end ", 1000), 10); err != nil || len(out) > MaxFueled {
		t.Fatalf("1,000 blocks: %d bytes, %v", len(out), err)
	}
}
