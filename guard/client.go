package guard

import (
	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
)

// NewClusterClient returns a go-redis ClusterClient set up to survive a failover: it reloads
// the slot map every c.StateReloadInterval (about a second), follows MOVED and ASK, and
// keeps a pool per node at least as large as the calls in flight.
func NewClusterClient(c conf.Redis) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      c.Addrs,
		Username:                   c.Username,
		Password:                   c.Password,
		DialTimeout:                c.DialTimeout,
		ReadTimeout:                c.ReadTimeout,
		WriteTimeout:               c.WriteTimeout,
		PoolSize:                   c.PoolSize,
		MinIdleConns:               c.MinIdleConns,
		PoolTimeout:                c.PoolTimeout,
		MaxRedirects:               c.MaxRedirects,
		ClusterStateReloadInterval: c.StateReloadInterval,
		ContextTimeoutEnabled:      true,
		// Protocol 2 keeps replies in the shapes the scripts and the proxy expect.
		Protocol:        2,
		DisableIdentity: true,
	})
}
