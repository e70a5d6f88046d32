package sale

import (
	"slices"
	"strings"
)

// PassthroughACL is the Redis ACL rule for the user that the proxy's pass-through connections
// log in as, one ACL SETUSER argument per element (the last one is a selector):
//
//	ACL SETUSER seckill-passthrough reset on >password <PassthroughACL()...>
//
// Redis checks it on every command, inside scripts, functions and transactions too, so no
// client can route around it: the user reads every key (%R~*) but writes only keys that are
// not Protected, publishes only on channels that are not ProtectedChannel (while it may
// subscribe to any), and runs no command that changes data whatever its keys (FLUSHALL,
// FLUSHDB, SWAPDB) or that administers the server (@admin: CONFIG SET, DEBUG, REPLICAOF,
// CLUSTER's slot commands, ACL SETUSER, MODULE, SHUTDOWN, MONITOR, CLIENT KILL and PAUSE).
//
// Redis glob patterns cannot say "everything but", so the writable keys are spelled as the
// complement of the protected names: "[^s]*", "s[^e]*", ..., "seckill:[^{s]*", and the
// protected names' own prefixes ("s", ..., "seckill:").
func PassthroughACL() []string {
	rule := []string{"resetkeys", "%R~*"}
	for _, p := range complement(protectedKeys) {
		rule = append(rule, "~"+p)
	}
	rule = append(rule, "resetchannels", "&*",
		"+@all", "-@admin", "-flushall", "-flushdb", "-swapdb", "-publish", "-spublish")
	sel := []string{"+publish", "+spublish", "resetchannels"}
	for _, p := range complement(protectedChannels) {
		sel = append(sel, "&"+p)
	}
	return append(rule, "("+strings.Join(sel, " ")+")")
}

// literal is a protected name: every name that starts with s (prefix), or s alone.
type literal struct {
	s      string
	prefix bool
}

type trieNode struct {
	next          map[byte]*trieNode
	exact, prefix bool
}

// complement returns Redis glob patterns that together match exactly the names that none of
// lits protects.
func complement(lits []literal) []string {
	root := &trieNode{}
	for _, l := range lits {
		n := root
		for i := 0; i < len(l.s); i++ {
			if n.next == nil {
				n.next = map[byte]*trieNode{}
			}
			c := n.next[l.s[i]]
			if c == nil {
				c = &trieNode{}
				n.next[l.s[i]] = c
			}
			n = c
		}
		if l.prefix {
			n.prefix = true
		} else {
			n.exact = true
		}
	}
	var out []string
	var walk func(n *trieNode, path string)
	walk = func(n *trieNode, path string) {
		if n.prefix {
			return // everything below is protected
		}
		if !n.exact {
			out = append(out, globLiteral(path))
		}
		bytes := make([]byte, 0, len(n.next))
		for b := range n.next {
			bytes = append(bytes, b)
		}
		slices.Sort(bytes)
		if len(bytes) == 0 {
			out = append(out, globLiteral(path)+"?*")
		} else {
			out = append(out, globLiteral(path)+"[^"+globClass(bytes)+"]*")
		}
		for _, b := range bytes {
			walk(n.next[b], path+string(b))
		}
	}
	walk(root, "")
	return out
}

// globLiteral escapes what Redis's glob matcher would read as a pattern.
func globLiteral(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// globClass escapes bytes for use inside a [...] class.
func globClass(bs []byte) string {
	var b strings.Builder
	for _, c := range bs {
		if strings.IndexByte(`]\^-`, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
