package router

import (
	"context"
	"strings"
	"sync/atomic"
)

// identity is what HELLO reports of the server: the upstream's redis_version and redis_mode,
// as INFO (Redis's own, merged over the masters) reports them, so that a client that reads
// one or the other sees the same server.
type identity struct{ version, mode string }

// ownIdentity is HELLO's answer with no Redis behind the proxy, or before Redis has answered.
var ownIdentity = identity{version: "7.0.0", mode: "standalone"}

// identityCache holds the upstream's identity once a master has told it.
type identityCache struct{ v atomic.Pointer[identity] }

// identity is the upstream's identity, asked of a master the first time (INFO server) and
// then kept: a failed ask answers ownIdentity and is tried again at the next HELLO.
func (r *Router) identity(ctx context.Context) identity {
	if r.opt.Upstream == nil {
		return ownIdentity
	}
	if id := r.ident.v.Load(); id != nil {
		return *id
	}
	_, replies, err := r.opt.Upstream.OnEveryMaster(ctx, [][]byte{[]byte("INFO"), []byte("server")})
	if err != nil || len(replies) == 0 || len(replies[0]) == 0 || replies[0][0] != '$' {
		return ownIdentity
	}
	id, ok := parseIdentity(bulkText(replies[0]))
	if !ok {
		return ownIdentity
	}
	r.ident.v.Store(&id)
	return id
}

// parseIdentity reads redis_version and redis_mode from INFO server's text.
func parseIdentity(info string) (identity, bool) {
	var id identity
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			id.version = v
		} else if v, ok := strings.CutPrefix(line, "redis_mode:"); ok {
			id.mode = v
		}
	}
	return id, id.version != "" && id.mode != ""
}
