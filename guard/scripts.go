package guard

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, embedded from lua/. Every one takes the same keys, in the order of
// Keys.scriptKeys, so that they all sit in one SKU's slot. Script.Run and EvalSha fall back to
// EVAL on NOSCRIPT, since SCRIPT LOAD is not replicated to a promoted replica.
var (
	//go:embed lua/buy.lua
	buyBody string
	// buyLua runs buy.lua's buy() for one SKU, its keys declared.
	buyLua    = buyBody + "return buy(KEYS, ARGV)\n"
	buyScript = redis.NewScript(buyLua)
	//go:embed lua/buymany.lua
	buyManyTail string
	// buyManyLua runs buy() for the SKUs of one master, one after the other; its keys are not
	// declared, so it may touch many slots of its node.
	buyManyLua    = "#!lua flags=allow-cross-slot-keys\n" + buyBody + buyManyTail
	buyManyScript = redis.NewScript(buyManyLua)
	//go:embed lua/status.lua
	statusLua    string
	statusScript = redis.NewScript(statusLua)
	//go:embed lua/warm.lua
	warmLua    string
	warmScript = redis.NewScript(warmLua)
	//go:embed lua/transition.lua
	transitionLua    string
	transitionScript = redis.NewScript(transitionLua)
	//go:embed lua/close.lua
	closeLua    string
	closeScript = redis.NewScript(closeLua)
	//go:embed lua/probe.lua
	probeLua    string
	probeScript = redis.NewScript(probeLua)
	//go:embed lua/release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
	//go:embed lua/lease.lua
	leaseLua    string
	leaseScript = redis.NewScript(leaseLua)
	//go:embed lua/limit.lua
	limitLua    string
	limitScript = redis.NewScript(limitLua)
	//go:embed lua/donate.lua
	donateLua    string
	donateScript = redis.NewScript(donateLua)
	//go:embed lua/reserved.lua
	reservedLua    string
	reservedScript = redis.NewScript(reservedLua)
	//go:embed lua/tomb.lua
	tombLua    string
	tombScript = redis.NewScript(tombLua)
	//go:embed lua/deny.lua
	denyLua    string
	denyScript = redis.NewScript(denyLua)
)
