package guard

import (
	"os"
	"slices"
	"strings"
	"testing"

	"seckill-proxy/sale"
)

// TestScriptsWriteWhatSaleReads: the outbox entries that buy.lua and release.lua write have
// the fields that sale.SoldFromEntry reads, and no others (sale.EntryFields names them).
func TestScriptsWriteWhatSaleReads(t *testing.T) {
	for file, kind := range map[string]string{"lua/buy.lua": sale.TypeOrder, "lua/release.lua": sale.TypeRelease} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		call := xaddArgs(t, string(src))
		var got []string
		for i := 3; i < len(call); i += 2 { // after the key and the '*' ID: name, value, ...
			got = append(got, strings.Trim(call[i], "' "))
		}
		var want []string
		fields := sale.EntryFields(sale.Sold{Kind: kind})
		for i := 0; i < len(fields); i += 2 {
			want = append(want, fields[i])
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s writes the fields %v; sale reads %v", file, got, want)
		}
	}
}

// xaddArgs are the top-level arguments of the XADD call in a script, split at commas outside
// brackets and parentheses.
func xaddArgs(t *testing.T, src string) []string {
	t.Helper()
	i := strings.Index(src, "redis.call('XADD'")
	if i < 0 {
		t.Fatal("no XADD in the script")
	}
	src = src[i+len("redis.call("):]
	var args []string
	depth, start := 0, 0
	for j, c := range src {
		switch c {
		case '(', '[', '{':
			depth++
		case ']', '}':
			depth--
		case ')':
			if depth == 0 {
				return append(args, strings.TrimSpace(src[start:j]))
			}
			depth--
		case ',':
			if depth == 0 {
				args = append(args, strings.TrimSpace(src[start:j]))
				start = j + 1
			}
		}
	}
	t.Fatal("the XADD call does not end")
	return nil
}
