package loadtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOrders: the orders files of load processes are read together; an id told in two of
// them, a line that is no id and a line longer than any id are refused, naming the file.
func TestReadOrders(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := file("a", "o1\no2\n"), file("b", "o3\n")
	if err := writeOrders(filepath.Join(dir, "c"), []string{"o4", "o5"}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadOrders([]string{a, b, filepath.Join(dir, "c")})
	if err != nil || strings.Join(got, ",") != "o1,o2,o3,o4,o5" {
		t.Fatalf("got %v, %v; want o1..o5", got, err)
	}
	for name, text := range map[string]string{
		"twice":   "o9\no3\n",
		"empty":   "o9\n\n",
		"spaces":  "o9 o10\n",
		"huge":    strings.Repeat("x", maxOrderLine+1) + "\n",
		"missing": "",
	} {
		p := file(name, text)
		if name == "missing" {
			p = filepath.Join(dir, "no such file")
		}
		if _, err := ReadOrders([]string{b, p}); err == nil {
			t.Errorf("%s: read, want an error", name)
		} else if !strings.Contains(err.Error(), p) && name != "missing" {
			t.Errorf("%s: %v does not name %s", name, err, p)
		}
	}
}
