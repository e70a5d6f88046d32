package proxy

import (
	"strings"

	"seckill-proxy/router"
)

// subNames are the channel, pattern and shard channel names one subscriber connection holds,
// bounded in bytes (limits.max_channel_bytes): Redis bounds none, and 1,000 channels of 64
// KiB on each of 4 connections held 1.3 GB of the proxy's memory, kept while they lived. A
// (P|S)SUBSCRIBE that would pass the bound is refused whole; an UNSUBSCRIBE gives back what it
// names (all of its kind, with no name).
type subNames struct {
	limit int
	bytes int
	names map[string]struct{} // the kind's letter, then the name
}

// kindOf is the letter of a (un)subscribe command's kind: c for channels, p for patterns, s
// for shard channels; 0 for any other command.
func kindOf(name string) byte {
	switch name {
	case "subscribe", "unsubscribe":
		return 'c'
	case "psubscribe", "punsubscribe":
		return 'p'
	case "ssubscribe", "sunsubscribe":
		return 's'
	}
	return 0
}

// take counts the names of a (P|S)SUBSCRIBE (name lower-cased, args the command), or returns
// the error to answer if they would pass the bound; an (P|S)UNSUBSCRIBE gives names back.
func (n *subNames) take(name string, args [][]byte) string {
	kind := kindOf(name)
	if kind == 0 || n.limit <= 0 {
		return ""
	}
	if n.names == nil {
		n.names = map[string]struct{}{}
	}
	if strings.Contains(name, "unsub") {
		n.give(kind, args[1:])
		return ""
	}
	more := 0
	for _, a := range args[1:] {
		if _, ok := n.names[string(kind)+string(a)]; !ok {
			more += len(a)
		}
	}
	if n.bytes+more > n.limit {
		return router.ChannelBytesError(n.bytes+more, n.limit)
	}
	for _, a := range args[1:] {
		key := string(kind) + string(a)
		if _, ok := n.names[key]; !ok {
			n.names[key] = struct{}{}
			n.bytes += len(a)
		}
	}
	return ""
}

// give forgets names of kind (all of them, with none named).
func (n *subNames) give(kind byte, names [][]byte) {
	if len(names) == 0 {
		for key := range n.names {
			if key[0] == kind {
				delete(n.names, key)
				n.bytes -= len(key) - 1
			}
		}
		return
	}
	for _, a := range names {
		key := string(kind) + string(a)
		if _, ok := n.names[key]; ok {
			delete(n.names, key)
			n.bytes -= len(a)
		}
	}
}
