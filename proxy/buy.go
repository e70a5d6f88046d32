package proxy

import (
	"seckill-proxy/guard"
)

// newGuardEngine makes k's buy engine: package guard decides each buy (a Loop of g's, which
// makes the replies in the style the router set at parse time) and says where its calls go.
func newGuardEngine(k *core, g *guard.Guard) *engine {
	return newEngine(k, g.Loop(), g)
}
