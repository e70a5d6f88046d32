package loadtest

import (
	"os/exec"
	"runtime/debug"
	"strings"
)

// Revision is the commit the running binary was built from, as a published table names what
// it measured: "`abc1234`", or "`abc1234` with uncommitted changes". It reads the binary's
// build info, or, where the build recorded none (GOFLAGS=-buildvcs=false, go run), asks git
// in the working directory (make bench and make chaos run from the checkout they built);
// "an unknown commit" when neither knows.
func Revision() string {
	rev, modified := buildRevision()
	if rev == "" {
		rev, modified = gitRevision()
	}
	switch {
	case rev == "":
		return "an unknown commit"
	case modified:
		return "`" + rev + "` with uncommitted changes"
	}
	return "`" + rev + "`"
}

func buildRevision() (rev string, modified bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return rev[:min(len(rev), 7)], modified
}

// generatedReports are the files make bench and make chaos write as they run: their own
// changes are not changes to what they measure.
var generatedReports = []string{"BENCHMARKS.md", "RELIABILITY.md", "docs/schemes.svg"}

func gitRevision() (rev string, modified bool) {
	out, err := exec.Command("git", "rev-parse", "--short=7", "HEAD").Output()
	if err != nil {
		return "", false
	}
	args := []string{"status", "--porcelain", "--untracked-files=no", "--", ":/"}
	for _, f := range generatedReports {
		args = append(args, ":(top,exclude)"+f)
	}
	status, err := exec.Command("git", args...).Output()
	return strings.TrimSpace(string(out)), err == nil && len(strings.TrimSpace(string(status))) > 0
}
