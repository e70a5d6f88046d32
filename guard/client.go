package guard

import (
	"context"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

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

// RedisLogger adapts log for go-redis's own messages (dial failures, pool trouble), which
// go-redis otherwise prints to stderr. Install it with redis.SetLogger: go-redis has one
// logger per process.
func RedisLogger(log *zap.Logger) interface {
	Printf(ctx context.Context, format string, v ...any)
} {
	return redisLogger{log.Named("go-redis").Sugar()}
}

type redisLogger struct{ s *zap.SugaredLogger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) { l.s.Warnf(format, v...) }
