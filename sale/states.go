package sale

// Sale states, in Redis meta and in seckill_items.status.
const (
	StateIdle    = "idle"
	StateWarming = "warming"
	StateOpen    = "open"
	StateClosed  = "closed"
)
