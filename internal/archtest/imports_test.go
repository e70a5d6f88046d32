package archtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "seckill-proxy"

// pkg is what `go list -json` says of a package, as far as the rules need.
type pkg struct {
	ImportPath  string
	Imports     []string
	TestImports []string
}

// listPackages runs `go list -json ./...` at the module's root.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rule is one row of the table: a package (or a pattern such as cmd/*) and what it may import.
type rule struct {
	pattern  string
	anything bool
	may      map[string]bool
	tests    bool // the row's imports are its tests' (a package with no code)
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readRules reads the table under "## Packages, and what each may import": the first cell's
// package, and of the last cell the project packages named in backticks, "nothing" or
// "anything". Backticked names that are not project packages (a type, a file) are ignored.
func readRules(t *testing.T, known map[string]bool) []rule {
	t.Helper()
	doc, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Packages, and what each may import")
	if !ok {
		t.Fatal(`docs/ARCHITECTURE.md has no "## Packages, and what each may import"`)
	}
	var rules []rule
	for line := range strings.Lines(rest) {
		if strings.HasPrefix(line, "## ") {
			break
		}
		cells := strings.Split(strings.TrimSpace(line), " | ")
		if len(cells) < 3 || !strings.HasPrefix(cells[0], "| `") {
			continue
		}
		name := backticked.FindStringSubmatch(cells[0])
		last := strings.TrimSuffix(cells[len(cells)-1], " |")
		r := rule{pattern: name[1], may: map[string]bool{}, anything: strings.HasPrefix(last, "anything")}
		r.tests = strings.Contains(last, "(in its tests)")
		for _, m := range backticked.FindAllStringSubmatch(last, -1) {
			if known[m[1]] {
				r.may[m[1]] = true
			}
		}
		if !r.anything && len(r.may) == 0 && !strings.HasPrefix(last, "nothing") {
			t.Errorf("the row of %s names no package it may import, and not \"nothing\": %q", r.pattern, last)
		}
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		t.Fatal("docs/ARCHITECTURE.md's table of packages has no rows")
	}
	return rules
}

// project is a project import's path inside the module ("" for another module's).
func project(importPath string) string {
	rel, ok := strings.CutPrefix(importPath, module+"/")
	if !ok {
		return ""
	}
	return rel
}

// TestImportsFollowTheTable: every package has a row in docs/ARCHITECTURE.md's table, and
// imports (its tests too, for a package with no code) only the project packages its row
// allows.
func TestImportsFollowTheTable(t *testing.T) {
	pkgs := listPackages(t)
	known := map[string]bool{}
	for _, p := range pkgs {
		known[project(p.ImportPath)] = true
	}
	rules := readRules(t, known)
	for _, p := range pkgs {
		name := project(p.ImportPath)
		i := slices.IndexFunc(rules, func(r rule) bool { ok, _ := path.Match(r.pattern, name); return ok })
		if i < 0 {
			t.Errorf("%s has no row in docs/ARCHITECTURE.md's table of packages", name)
			continue
		}
		r := rules[i]
		if r.anything {
			continue
		}
		imports := p.Imports
		if r.tests {
			imports = append(slices.Clone(imports), p.TestImports...)
		}
		for _, imp := range imports {
			if dep := project(imp); dep != "" && dep != name && !r.may[dep] {
				t.Errorf("%s imports %s, which its row in docs/ARCHITECTURE.md does not allow", name, dep)
			}
		}
	}
}

// maxLines is the most lines a file of code may have: a longer one holds more than one
// concern, and is split by concern.
const maxLines = 450

// TestFilesStayShort: no Go file of the project's code (tests aside) has more than maxLines
// lines.
func TestFilesStayShort(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) < 50 {
		t.Fatalf("go list named %d files of code, fewer than the project has", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > maxLines {
			t.Errorf("%s has %d lines, more than %d: split it by concern", f, n, maxLines)
		}
	}
}
