package outbox

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The sweeper's and the tee's Lua scripts, embedded from lua/. Each of the sweeper's touches
// one SKU's keys, in its slot; the tee's xdel.lua many buckets' outboxes on one master.
var (
	//go:embed lua/retire.lua
	retireLua    string
	retireScript = redis.NewScript(retireLua)
	//go:embed lua/bury.lua
	buryLua    string
	buryScript = redis.NewScript(buryLua)
	//go:embed lua/xdel.lua
	xdelLua    string
	xdelScript = redis.NewScript(xdelLua)
)
