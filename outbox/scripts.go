package outbox

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The sweeper's Lua scripts, embedded from lua/. Each touches one SKU's keys, in its slot.
var (
	//go:embed lua/retire.lua
	retireLua    string
	retireScript = redis.NewScript(retireLua)
	//go:embed lua/bury.lua
	buryLua    string
	buryScript = redis.NewScript(buryLua)
)
