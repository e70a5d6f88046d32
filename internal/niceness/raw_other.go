//go:build !linux

package niceness

// niceOf is the nice value of getpriority(2)'s return, the nice value itself outside Linux.
func niceOf(raw int) int { return raw }
