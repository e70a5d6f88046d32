package sale

import (
	"os"
	"strings"
	"testing"
)

// globMatch is Redis's stringmatchlen for the patterns complement makes: literals, '?', '*',
// '\' escapes and [^...] classes.
func globMatch(p, s string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if globMatch(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && globMatch(p[1:], s[1:])
	case '[':
		if s == "" {
			return false
		}
		i, not, hit := 1, false, false
		if i < len(p) && p[i] == '^' {
			not, i = true, i+1
		}
		for ; i < len(p) && p[i] != ']'; i++ {
			if p[i] == '\\' {
				i++
			}
			if p[i] == s[0] {
				hit = true
			}
		}
		return hit != not && globMatch(p[i+1:], s[1:])
	case '\\':
		p = p[1:]
	}
	return s != "" && p[0] == s[0] && globMatch(p[1:], s[1:])
}

func writable(patterns []string, name string) bool {
	for _, p := range patterns {
		if globMatch(p, name) {
			return true
		}
	}
	return false
}

// names near every edge of the protected names: their prefixes, themselves, one byte more,
// one byte changed.
func edgeNames(lits []literal) []string {
	out := []string{"", "x", "foo", "seckill:stock:sku_1", "seckill:order:queue", "seckill:users:1"}
	for _, l := range lits {
		for i := 0; i <= len(l.s); i++ {
			out = append(out, l.s[:i], l.s[:i]+"x", l.s[:i]+"{", l.s[:i]+"*")
			if i < len(l.s) {
				out = append(out, l.s[:i]+string(l.s[i]+1)+l.s[i+1:])
			}
		}
		out = append(out, l.s+"s", l.s+"sku}:stock")
	}
	return out
}

func TestComplementMatchesExactlyTheUnprotected(t *testing.T) {
	keys := complement(protectedKeys)
	for _, name := range edgeNames(protectedKeys) {
		if got, want := writable(keys, name), !Protected([]byte(name)); got != want {
			t.Errorf("key %q: writable %v, want %v", name, got, want)
		}
	}
	chans := complement(protectedChannels)
	for _, name := range edgeNames(protectedChannels) {
		if got, want := writable(chans, name), !ProtectedChannel([]byte(name)); got != want {
			t.Errorf("channel %q: publishable %v, want %v", name, got, want)
		}
	}
}

func FuzzComplement(f *testing.F) {
	for _, n := range edgeNames(protectedKeys) {
		f.Add(n)
	}
	keys, chans := complement(protectedKeys), complement(protectedChannels)
	f.Fuzz(func(t *testing.T, name string) {
		if writable(keys, name) == Protected([]byte(name)) {
			t.Errorf("key %q: protected %v, and writable too (or neither)", name, Protected([]byte(name)))
		}
		if writable(chans, name) == ProtectedChannel([]byte(name)) {
			t.Errorf("channel %q: protected %v, and publishable too (or neither)", name, ProtectedChannel([]byte(name)))
		}
	})
}

func TestComplementEscapes(t *testing.T) {
	got := complement([]literal{{"a*]", false}})
	want := []string{"", "[^a]*", "a", `a[^*]*`, `a\*`, `a\*[^\]]*`, `a\*\]?*`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("complement = %q, want %q", got, want)
	}
	for _, name := range []string{"a*]", "a*]x", "a*", "a", "", "b", "a*x"} {
		if writable(got, name) == (name == "a*]") {
			t.Errorf("%q: writable %v", name, writable(got, name))
		}
	}
}

// The dev stack and operators read the rule from scripts/redis-passthrough.acl, one argument
// per line: it must be what this package says.
func TestCheckedInRuleIsCurrent(t *testing.T) {
	b, err := os.ReadFile("../scripts/redis-passthrough.acl")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if got, want := strings.Join(lines, "\n"), strings.Join(PassthroughACL(), "\n"); got != want {
		t.Fatalf("scripts/redis-passthrough.acl is stale; regenerate it with\n  go run ./cmd/seckill-proxy -print-redis-acl\nhave:\n%s\nwant:\n%s", got, want)
	}
}
