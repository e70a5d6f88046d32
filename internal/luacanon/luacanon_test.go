package luacanon

import (
	"errors"
	"strings"
	"testing"

	"seckill-proxy/internal/testenv"
)

// seedsBuy is the seeds' buy script as the built-in copy spells it.
const seedsBuy = `if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return -1 end
local current_stock = tonumber(redis.call('GET', KEYS[1]) or "0")
if current_stock < tonumber(ARGV[2]) then return 0 end
redis.call('DECRBY', KEYS[1], tonumber(ARGV[2]))
redis.call('HSET', KEYS[2], ARGV[1], 1)
return 1`

func canon(t *testing.T, body string) string {
	t.Helper()
	c, err := Canonical(body)
	if err != nil {
		t.Fatalf("Canonical(%q): %v", body, err)
	}
	return c
}

// TestSameMeaning: scripts that differ only in their writing have one form.
func TestSameMeaning(t *testing.T) {
	base := canon(t, seedsBuy)
	for name, body := range map[string]string{
		"as carried, with locals and comments": testenv.SeedsBuyAsCarried,
		"semicolons and one line":              strings.ReplaceAll(seedsBuy, "\n", "; "),
		"double quotes and a long comment":     "--[==[ the\nbuy ]==]\n" + strings.ReplaceAll(seedsBuy, "'", `"`),
		"other local names": strings.ReplaceAll(strings.ReplaceAll(testenv.SeedsBuyAsCarried, "current_stock", "left"),
			"quantity", "q"),
		"parens around a condition": strings.Replace(seedsBuy, "if current_stock < tonumber(ARGV[2]) then",
			"if (current_stock < tonumber(ARGV[2])) then", 1),
		"a long string":                  strings.Replace(seedsBuy, "'GET'", "[[GET]]", 1),
		"numbers spelled another way":    strings.Replace(strings.Replace(seedsBuy, "== 1 then", "== 1.0 then", 1), "return 0 end", "return 0x0 end", 1),
		"tonumber of a tonumber'd local": strings.Replace(testenv.SeedsBuyAsCarried, "if current_stock < quantity", "if current_stock < tonumber(quantity)", 1),
		"locals declared together": strings.Replace(testenv.SeedsBuyAsCarried,
			"local stock_key = KEYS[1] -- the item's stock\nlocal buyers_key = KEYS[2] -- who bought\n",
			"local stock_key, buyers_key = KEYS[1], KEYS[2]\n", 1),
		"CRLF line ends": strings.ReplaceAll(testenv.SeedsBuyAsCarried, "\n", "\r\n"),
	} {
		if body == seedsBuy || (body == testenv.SeedsBuyAsCarried) != (name == "as carried, with locals and comments") {
			t.Errorf("%s: the variant is the original, unchanged", name)
		}
		if got := canon(t, body); got != base {
			t.Errorf("%s:\n got %s\nwant %s", name, got, base)
		}
	}
}

// TestOtherMeaning: scripts that do something else keep a form of their own.
func TestOtherMeaning(t *testing.T) {
	base := canon(t, seedsBuy)
	for name, body := range map[string]string{
		"another comparison":    strings.Replace(seedsBuy, "current_stock < tonumber", "current_stock <= tonumber", 1),
		"another key":           strings.Replace(seedsBuy, "redis.call('DECRBY', KEYS[1]", "redis.call('DECRBY', KEYS[2]", 1),
		"another argument":      strings.Replace(seedsBuy, "HSET', KEYS[2], ARGV[1]", "HSET', KEYS[2], ARGV[3]", 1),
		"a reassigned alias":    strings.Replace(testenv.SeedsBuyAsCarried, "if redis.call('HEXISTS'", "uid = 'x'\nif redis.call('HEXISTS'", 1),
		"a string changed":      strings.Replace(seedsBuy, "'HSET'", "'HSETNX'", 1),
		"another reply":         strings.Replace(seedsBuy, "return 0", "return 2", 1),
		"a comment in a string": strings.Replace(seedsBuy, "'GET'", "'GET--'", 1),
		"pcall for call":        strings.Replace(seedsBuy, "redis.call('DECRBY'", "redis.pcall('DECRBY'", 1),
		"an alias used as more": strings.Replace(testenv.SeedsBuyAsCarried, "local stock_key = KEYS[1]", "local stock_key = KEYS[1] .. 'x'", 1),
	} {
		if got := canon(t, body); got == base {
			t.Errorf("%s: same form as the seeds' buy: %s", name, got)
		}
	}
}

func TestRefused(t *testing.T) {
	for name, body := range map[string]string{
		"an open string":       "return 'abc",
		"an open long comment": "--[[ return 1",
		"an open long string":  "return [==[ x ]=]",
		"a byte Lua lacks":     "return 1 @ 2",
	} {
		if _, err := Canonical(body); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, err := Canonical(strings.Repeat(" ", MaxScript+1)); !errors.Is(err, ErrTooLong) {
		t.Errorf("a body over MaxScript: %v, want ErrTooLong", err)
	}
}

// FuzzCanonical: any body gets a form or an error without panicking, comments and whitespace
// between tokens change nothing, and a form is its own form.
func FuzzCanonical(f *testing.F) {
	f.Add(seedsBuy)
	f.Add(testenv.SeedsBuyAsCarried)
	f.Add("local a, b = KEYS[1], ARGV[1] return tonumber(tonumber(b))")
	f.Add("if (x) then return [=[s]=] end --[[c]]")
	f.Fuzz(func(t *testing.T, body string) {
		c, err := Canonical(body)
		if err != nil {
			return
		}
		if c2, err := Canonical("-- lead\n" + body + "\n"); err != nil || c2 != c {
			t.Fatalf("a comment in front changed the form: %q -> %q (%v)", c, c2, err)
		}
		if c3, err := Canonical(c); err != nil || c3 != c {
			t.Fatalf("the form's own form differs: %q -> %q (%v)", c, c3, err)
		}
	})
}

func BenchmarkCanonical(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical(testenv.SeedsBuyAsCarried); err != nil {
			b.Fatal(err)
		}
	}
}
