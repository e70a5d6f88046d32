package loadtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/schema"
)

// SchemeSeeds is the seeds' whole design, as a user of it runs it: their stock script on one
// Redis and a synchronous Kafka send per order (as one-redis), and their own consumer,
// running during the sale, writing each order to MySQL with their optimistic UPDATE ...
// WHERE stock > 0 and an INSERT, in one transaction. The consumer runs in the load tool's
// process (its CPU is counted there), on a topic of the sale's own.

// The seeds' consumer's tables, beside the proxy's own.
const seedsTables = `CREATE TABLE IF NOT EXISTS bench_seeds_stock (
	sku VARCHAR(64) NOT NULL PRIMARY KEY, stock INT NOT NULL
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS bench_seeds_orders (
	order_id VARCHAR(64) NOT NULL PRIMARY KEY, sku VARCHAR(64) NOT NULL, uid VARCHAR(64) NOT NULL
) ENGINE=InnoDB`

// seedsConsumers is how many orders the seeds' consumer writes to MySQL at once: a writer
// per partition, as a consumer group of that many members would.
const seedsConsumers = 8

// openSeedsScheme is one-redis's buyer, with the seeds' consumer storing its orders.
func openSeedsScheme(ctx context.Context, o SchemesOptions, sku string) (*scheme, error) {
	db, err := schema.Open(o.Services.MySQL)
	if err != nil {
		return nil, err
	}
	for stmt := range strings.SplitSeq(seedsTables, ";\n") {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			db.Close()
			return nil, fmt.Errorf("the seeds' consumer's tables: %w", err)
		}
	}
	_, err = db.ExecContext(ctx, `DELETE FROM bench_seeds_orders WHERE sku = ?`, sku)
	if err == nil {
		_, err = db.ExecContext(ctx, `REPLACE INTO bench_seeds_stock (sku, stock) VALUES (?, ?)`, sku, o.Units)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	k := o.Services.Kafka
	k.Topic = k.Topic + ".seeds." + sku
	k.DeadLetterTopic = k.Topic + ".dlq"
	if err := connect.EnsureTopics(k); err != nil {
		db.Close()
		return nil, err
	}
	cons, err := startSeedsConsumer(k, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	rc := redis.NewClient(&redis.Options{Addr: o.OneRedis, PoolSize: o.Load.Conns, MinIdleConns: o.Load.Conns, Protocol: 2})
	sc, err := connect.Sarama(k)
	var producer sarama.SyncProducer
	if err == nil {
		producer, err = sarama.NewSyncProducer(k.Brokers, sc)
	}
	var seeds *Seeds
	if err == nil {
		if seeds, err = NewSeeds(ctx, rc, producer, k.Topic, sku, o.Units); err != nil {
			_ = producer.Close()
		}
	}
	if err != nil {
		cons.stop()
		rc.Close()
		db.Close()
		return nil, err
	}
	settle := func(ctx context.Context, res Result) (kept, error) {
		units, err := cons.await(ctx, int64(len(res.Orders)), o.Drain)
		return keptOf(units, res, o.Load.Qty), err
	}
	return &scheme{buy: seeds.Buy, settle: settle, close: func() { seeds.Close(); cons.stop(); rc.Close(); db.Close() }, stockKey: seeds.keys[0]}, nil
}

// seedsConsumer reads the seeds' orders from Kafka and writes each to MySQL.
type seedsConsumer struct {
	consumer sarama.Consumer
	parts    []sarama.PartitionConsumer
	wg       sync.WaitGroup
	mu       sync.Mutex
	stored   int64 // orders written
	failed   error
}

func startSeedsConsumer(k conf.Kafka, db *sql.DB) (*seedsConsumer, error) {
	sc, err := connect.Sarama(k)
	if err != nil {
		return nil, err
	}
	consumer, err := sarama.NewConsumer(k.Brokers, sc)
	if err != nil {
		return nil, err
	}
	parts, err := consumer.Partitions(k.Topic)
	if err != nil {
		_ = consumer.Close()
		return nil, err
	}
	c := &seedsConsumer{consumer: consumer}
	orders := make(chan *sarama.ConsumerMessage, 1024)
	var feeders sync.WaitGroup
	for _, p := range parts {
		pc, err := consumer.ConsumePartition(k.Topic, p, sarama.OffsetOldest)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.parts = append(c.parts, pc)
		feeders.Go(func() {
			for m := range pc.Messages() {
				orders <- m
			}
		})
	}
	go func() { feeders.Wait(); close(orders) }()
	for range seedsConsumers {
		c.wg.Go(func() {
			for m := range orders {
				err := seedsStore(db, m.Value)
				c.mu.Lock()
				if err == nil {
					c.stored++
				} else if c.failed == nil {
					c.failed = err
				}
				c.mu.Unlock()
			}
		})
	}
	return c, nil
}

// seedsStore is the seeds' consumer's write of one order: the optimistic UPDATE ... WHERE
// stock > 0 and the INSERT, in one transaction; an order seen twice is stored once.
func seedsStore(db *sql.DB, value []byte) error {
	var o struct {
		OrderID string `json:"order_id"`
		SKU     string `json:"sku"`
		UID     string `json:"uid"`
	}
	if err := json.Unmarshal(value, &o); err != nil {
		return err
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.Exec(`UPDATE bench_seeds_stock SET stock = stock - 1 WHERE sku = ? AND stock > 0`, o.SKU)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil // sold out in MySQL: the seeds drop the order
	}
	_, err = tx.Exec(`INSERT INTO bench_seeds_orders (order_id, sku, uid) VALUES (?, ?, ?)`, o.OrderID, o.SKU, o.UID)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1062 { // ER_DUP_ENTRY: stored before
		return nil
	}
	if err != nil {
		return err
	}
	return tx.Commit()
}

// await waits until the consumer has stored want orders (or within, or ctx, ends), and
// returns how many it stored.
func (c *seedsConsumer) await(ctx context.Context, want int64, within time.Duration) (int64, error) {
	deadline := time.Now().Add(within)
	for {
		c.mu.Lock()
		stored, failed := c.stored, c.failed
		c.mu.Unlock()
		switch {
		case failed != nil:
			return stored, fmt.Errorf("the seeds' consumer: %w", failed)
		case stored >= want:
			return stored, nil
		case time.Now().After(deadline):
			return stored, fmt.Errorf("the seeds' consumer stored %d of %d orders in %v", stored, want, within)
		case ctx.Err() != nil:
			return stored, ctx.Err()
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *seedsConsumer) stop() {
	for _, pc := range c.parts {
		pc.AsyncClose() // ends its messages, and so, once all have, the writers
	}
	c.wg.Wait()
	_ = c.consumer.Close()
}
