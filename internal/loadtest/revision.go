package loadtest

import "runtime/debug"

// Revision is the commit the running binary was built from, as a published table names what
// it measured: "`abc1234`", "`abc1234` with uncommitted changes", or "an unknown commit" for a
// binary built outside a git checkout (or by go run, which records none).
func Revision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "an unknown commit"
	}
	var rev string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "an unknown commit"
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	if modified {
		return "`" + rev + "` with uncommitted changes"
	}
	return "`" + rev + "`"
}
