package loadtest

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"
	"github.com/tidwall/redcon"
)

//go:embed lua/seeds.lua
var seedsLua string

var seedsScript = redis.NewScript(seedsLua)

// Seeds is the seeds' own design, in-process, for comparison: a service that calls a Lua
// script through go-redis, guards a local sold-out flag with a mutex, and sends each order to
// Kafka synchronously. Its keys are seckill:{<sku>}:seeds:*, apart from the proxy's. Serve puts
// it behind RESP, as the seeds' service was.
type Seeds struct {
	rc       redis.UniversalClient
	producer sarama.SyncProducer
	topic    string
	sku      string
	keys     []string

	mu      sync.Mutex
	soldOut bool
}

// NewSeeds sets up units of stock for sku under the seeds' keys.
func NewSeeds(ctx context.Context, rc redis.UniversalClient, producer sarama.SyncProducer, topic, sku string, units int) (*Seeds, error) {
	s := &Seeds{rc: rc, producer: producer, topic: topic, sku: sku,
		keys: []string{"seckill:{" + sku + "}:seeds:stock", "seckill:{" + sku + "}:seeds:users"}}
	if err := rc.Del(ctx, s.keys...).Err(); err != nil {
		return nil, err
	}
	if err := rc.Set(ctx, s.keys[0], units, 0).Err(); err != nil {
		return nil, err
	}
	return s, nil
}

var (
	errSeedsSoldOut   = errors.New("SOLDOUT")
	errSeedsDuplicate = errors.New("DUPLICATE")
)

// Buy is the seeds' buy.
func (s *Seeds) Buy(ctx context.Context, uid string) (string, error) {
	s.mu.Lock()
	soldOut := s.soldOut
	s.mu.Unlock()
	if soldOut {
		return "", errSeedsSoldOut
	}
	n, err := seedsScript.Run(ctx, s.rc, s.keys, uid).Int()
	if err != nil {
		return "", fmt.Errorf("UNAVAILABLE %w", err)
	}
	switch n {
	case 0:
		s.mu.Lock()
		s.soldOut = true
		s.mu.Unlock()
		return "", errSeedsSoldOut
	case -1:
		return "", errSeedsDuplicate
	}
	id := xid.New().String()
	value := fmt.Sprintf(`{"order_id":%q,"sku":%q,"uid":%q,"ts":%d}`, id, s.sku, uid, time.Now().UnixMilli())
	if _, _, err := s.producer.SendMessage(&sarama.ProducerMessage{Topic: s.topic, Key: sarama.StringEncoder(s.sku), Value: sarama.StringEncoder(value)}); err != nil {
		// The seeds' lost order: Redis said yes, the queue send failed.
		return "", fmt.Errorf("lost order %s: %w", id, err)
	}
	return id, nil
}

// Close closes the seeds' Kafka producer.
func (s *Seeds) Close() error { return s.producer.Close() }

// Serve answers SECKILL.BUY <sku> <uid> with the seeds' design on ln, over RESP, one go-redis
// call per request as the seeds' service made them, so that it meets the same load as the
// proxy. It returns when ln is closed.
func (s *Seeds) Serve(ctx context.Context, ln net.Listener) error {
	srv := redcon.NewServerNetwork("tcp", "", func(conn redcon.Conn, cmd redcon.Command) {
		if len(cmd.Args) < 3 || !strings.EqualFold(string(cmd.Args[0]), "seckill.buy") {
			conn.WriteError("ERR the seeds' service knows only SECKILL.BUY <sku> <uid>")
			return
		}
		id, err := s.Buy(ctx, string(cmd.Args[2]))
		if err != nil {
			conn.WriteError(err.Error())
			return
		}
		conn.WriteBulkString(id)
	}, nil, nil)
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return srv.Serve(ln)
}
