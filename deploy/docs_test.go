package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"seckill-proxy/internal/chaos"
)

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	docName = regexp.MustCompile(`docs/[A-Za-z_-]+\.md`)
)

// TestDocsLinks: every relative link of README.md and docs/*.md leads to a file or folder of
// the repo, every docs/ file the README names exists, and every docs/ file is linked from
// the README (none is orphaned).
func TestDocsLinks(t *testing.T) {
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range append([]string{"../README.md"}, docs...) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
				t.Errorf("%s links to %s, which is not in the repo", path, m[1])
			}
		}
	}
	for _, name := range docName.FindAllString(string(readme), -1) {
		if _, err := os.Stat(filepath.Join("..", name)); err != nil {
			t.Errorf("README.md names %s, which does not exist", name)
		}
	}
	for _, d := range docs {
		name := "docs/" + filepath.Base(d)
		if !strings.Contains(string(readme), "]("+name+")") {
			t.Errorf("%s is not linked from README.md", name)
		}
	}
}

// TestFaultsDocumented: every fault of the suite's catalogue has its row in DELIVERY.md's table
// of what each run does (a network fault under its LINK-KIND row), and the table has no fault
// the suite does not know.
func TestFaultsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/DELIVERY.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-zA-Z-]+)` \\| ").FindAllStringSubmatch(string(b), -1) {
		rows[m[1]] = true
	}
	want := map[string]bool{}
	for _, f := range chaos.Catalogue() {
		name := f.Name
		if f.Kind == chaos.Network {
			_, kind, _ := strings.Cut(name, "-")
			name = "LINK-" + kind
		}
		want[name] = true
		if !rows[name] {
			t.Errorf("DELIVERY.md has no row for %s", name)
		}
	}
	for r := range rows {
		if !want[r] {
			t.Errorf("DELIVERY.md has a row for %s, which the suite does not run", r)
		}
	}
}
