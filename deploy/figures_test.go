package deploy

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	// benchSection opens a section of BENCHMARKS.md: "## (a, b) ..." names a and b.
	benchSection = regexp.MustCompile(`(?m)^## \(([a-z, ]+)\)`)
	// benchCite is a citation of a section in prose: "BENCHMARKS.md (n)".
	benchCite = regexp.MustCompile(`BENCHMARKS\.md \(([a-z])\)`)
	// figure is a quoted measurement: a count per second, a time in microseconds, a share.
	figure = regexp.MustCompile(`(\d[\d,]*(?:\.\d+)?) ?(?:requests/s|commands/s|µs|%)`)
	// number is any number of a paragraph, of which a quoted ratio may be the quotient.
	number = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?`)
	// ratio is a quoted ratio: 1.78x.
	ratio = regexp.MustCompile(`(\d+\.\d+)(?:x|×)`)
	// dated: a paragraph that names the day of its own measurement quotes that run, not the
	// table (it must say which).
	dated = regexp.MustCompile(`\b20\d\d-\d\d-\d\d\b`)
)

// benchSections reads BENCHMARKS.md's sections by letter, thousands' commas removed.
func benchSections(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	md := string(raw)
	secs := map[string]string{}
	locs := benchSection.FindAllStringSubmatchIndex(md, -1)
	for i, loc := range locs {
		end := len(md)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		body := strings.ReplaceAll(md[loc[0]:end], ",", "")
		if j := strings.Index(body, "\n## "); j >= 0 {
			body = body[:j]
		}
		for _, letter := range strings.Split(md[loc[2]:loc[3]], ",") {
			secs[strings.TrimSpace(letter)] = body
		}
	}
	return secs
}

// TestQuotedFigures: a figure that README.md or docs/ quote from BENCHMARKS.md, citing its
// section ("BENCHMARKS.md (d)"), is in that section: a count per second, a time in µs or a
// share in % appears there (thousands' commas aside), and a ratio (1.78x) appears there or is
// the quotient of two numbers of the same paragraph that do (to the second decimal). A cited
// section must exist. So make bench cannot rewrite a table and leave the prose quoting the
// figures it replaced. A paragraph that names the day of its own measurement quotes that run
// and is not held to the table.
func TestQuotedFigures(t *testing.T) {
	secs := benchSections(t)
	files, _ := filepath.Glob("../docs/*.md")
	for _, f := range append(files, "../README.md") {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, para := range strings.Split(string(raw), "\n\n") {
			for _, m := range benchCite.FindAllStringSubmatch(para, -1) {
				sec, ok := secs[m[1]]
				if !ok {
					t.Errorf("%s cites BENCHMARKS.md (%s), which has no such section", f, m[1])
					continue
				}
				if dated.MatchString(para) {
					continue
				}
				for _, bad := range unquoted(para, sec) {
					t.Errorf("%s quotes %s beside BENCHMARKS.md (%s), which does not have it:\n%s", f, bad, m[1], para)
				}
			}
		}
	}
}

// unquoted are para's figures that sec does not hold.
func unquoted(para, sec string) []string {
	var bad, held []string
	for _, m := range figure.FindAllStringSubmatch(para, -1) {
		if !strings.Contains(sec, strings.ReplaceAll(m[1], ",", "")) {
			bad = append(bad, m[0])
		}
	}
	for _, n := range number.FindAllString(para, -1) {
		if n = strings.ReplaceAll(n, ",", ""); strings.Contains(sec, n) {
			held = append(held, n)
		}
	}
	for _, m := range ratio.FindAllStringSubmatch(para, -1) {
		if !strings.Contains(sec, m[1]) && !quotient(m[1], held) {
			bad = append(bad, m[0])
		}
	}
	return bad
}

// quotient: r is a/b, rounded to its decimals, for two of figs.
func quotient(r string, figs []string) bool {
	want, err := strconv.ParseFloat(r, 64)
	if err != nil {
		return false
	}
	for _, a := range figs {
		for _, b := range figs {
			x, _ := strconv.ParseFloat(a, 64)
			y, _ := strconv.ParseFloat(b, 64)
			if y != 0 && math.Abs(x/y-want) < 0.006 {
				return true
			}
		}
	}
	return false
}
