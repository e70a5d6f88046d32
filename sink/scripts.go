package sink

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The sink's Lua script, embedded from lua/. It touches one SKU's keys, in its slot.
var (
	//go:embed lua/outcome.lua
	outcomeLua    string
	outcomeScript = redis.NewScript(outcomeLua)
)
