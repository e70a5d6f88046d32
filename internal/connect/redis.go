package connect

import (
	"context"
	"crypto/tls"
	"slices"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/internal/tlsfiles"
)

// Redis returns a go-redis ClusterClient set up to survive a failover: it reloads
// the slot map every c.StateReloadInterval (about a second), follows MOVED and ASK, and
// keeps a pool per node at least as large as the calls in flight.
//
// In standalone mode the one server is given every slot, so the same client (and every
// script of this package) runs against a plain Redis server.
func Redis(c conf.Redis) *redis.ClusterClient {
	opt := &redis.ClusterOptions{
		Addrs:                      slices.Clip(slices.Clone(c.Addrs)), // go-redis appends to it: a client's own
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
	}
	tc, err := RedisTLS(c)
	if m := conf.AddressMap(c.AddressMap); m != nil || tc != nil || err != nil {
		opt.Dialer = Dialer{Timeout: c.DialTimeout, Map: m, TLS: tc, Err: err}.DialContext
	}
	if c.Mode == conf.ModeStandalone {
		addr := c.Addrs[0]
		opt.ClusterSlots = func(context.Context) ([]redis.ClusterSlot, error) {
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: addr}}}}, nil
		}
	}
	return redis.NewClusterClient(opt)
}

// RedisTLS is the TLS configuration of every connection to Redis (nil: plaintext), from
// redis.tls; the files are read again when they change. A binary calls it at start, to stop
// on a file that cannot be read; a client made with files that cannot be read fails every
// dial with that error.
func RedisTLS(c conf.Redis) (*tls.Config, error) {
	return tlsfiles.Client("redis.tls", c.TLS, nil)
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
