package upstream

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
)

// A keyless EVAL in front of a cluster runs on any master, which caches its script; the
// client's next EVALSHA of it (or SCRIPT EXISTS, which answers 1 only if every master has
// it) may go elsewhere. So the script is loaded on every master first, once per set of
// masters: one server would have cached it for every later call.

// maxLoadedScripts bounds the scripts remembered as loaded; past it they are forgotten
// together, and loaded again when next used.
const maxLoadedScripts = 4096

// loadedScripts are the SHA1s of scripts loaded on every master, with the masters they were
// loaded on (a failover's new master lacks them).
type loadedScripts struct {
	mu sync.Mutex
	m  map[string]string
}

// keylessEval runs args, an EVAL or EVAL_RO with no keys, on any master, its script loaded on
// every master first.
func (c *Cluster) keylessEval(ctx context.Context, args [][]byte) []byte {
	ms, err := c.masters(ctx)
	if err != nil {
		return unavailable(err)
	}
	sum := sha1.Sum(args[1])
	sha, masters := hex.EncodeToString(sum[:]), strings.Join(ms, ",")
	c.loaded.mu.Lock()
	known := c.loaded.m[sha] == masters
	c.loaded.mu.Unlock()
	if !known {
		// A body Redis refuses (a syntax error) is refused again by the EVAL below, with
		// Redis's own text; so the load's reply only decides whether it is remembered.
		if r := c.everyMaster(ctx, [][]byte{[]byte("SCRIPT"), []byte("LOAD"), args[1]}); len(r) > 0 && r[0] == '$' {
			c.loaded.mu.Lock()
			if c.loaded.m == nil || len(c.loaded.m) >= maxLoadedScripts {
				c.loaded.m = map[string]string{}
			}
			c.loaded.m[sha] = masters
			c.loaded.mu.Unlock()
		}
	}
	addr, err := c.anyMaster(ctx)
	if err != nil {
		return unavailable(err)
	}
	return c.one(ctx, addr, args)
}

// wholeServer runs args, a command that acts on a whole server, on every master. After a
// SCRIPT FLUSH, the scripts loaded there for keyless EVALs are forgotten, before and after
// (one loaded meanwhile may be gone): the next keyless EVAL of each loads it on every master
// again, so that the client's EVALSHA finds it wherever it goes.
func (c *Cluster) wholeServer(ctx context.Context, args [][]byte) []byte {
	if strings.EqualFold(string(args[0]), "script") && len(args) > 1 && strings.EqualFold(string(args[1]), "flush") {
		c.loaded.forget()
		defer c.loaded.forget()
	}
	return c.everyMaster(ctx, args)
}

// forget lets go of every script remembered as loaded.
func (l *loadedScripts) forget() {
	l.mu.Lock()
	l.m = nil
	l.mu.Unlock()
}
