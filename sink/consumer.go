package sink

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/retry"
	"seckill-proxy/sale"
)

// batchTimeout bounds one batch's MySQL transaction.
const batchTimeout = 30 * time.Second

// SinkStats are the persister's counters.
type SinkStats struct {
	// Confirmed and Rejected count new orders stored, Cancelled the releases applied;
	// Redelivered counts messages already stored.
	Confirmed, Rejected, Cancelled, Redelivered int64
	// DeadLetters counts messages sent to the dead-letter topic.
	DeadLetters int64
	// Batches counts committed transactions; Retries counts failed attempts.
	Batches, Retries int64
}

// Sink consumes orders from Kafka as a consumer group and persists them into MySQL (see
// Persist), a batch per transaction. After each commit it writes the orders' outcomes to their
// SKUs' result hashes in Redis, and only then marks the offsets. MySQL errors are retried with
// backoff and no offset moves; a message that can never be parsed goes to the dead-letter topic
// with its error, and the orders after it go on.
//
// Build it with NewSink; Run blocks until ctx ends, then finishes its batch, commits its offsets
// and leaves the group.
type Sink struct {
	cfg conf.Config
	db  *sql.DB
	rc  *redis.ClusterClient
	log *zap.Logger
	// replicas is how many replicas each master has, for the WAIT after the outcomes
	// (outcomes.go), kept fresh while the sink consumes.
	replicas connect.ReplicaView
	dlq      sarama.SyncProducer

	confirmed, rejected, cancelled, redelivered, deadLetters, batches, retries atomic.Int64
	// claimed is the number of partitions of the current group session, -1 outside one.
	claimed atomic.Int64

	batchLatency prometheus.Histogram
	lagMu        sync.Mutex
	lag          map[topicPartition]int64 // of the partitions this sink holds

	// waiting says what the sink waits for at start ("" once it has joined Kafka): /readyz
	// and the log say so.
	waiting atomic.Pointer[string]
	sales   saleCounts // orders handled, by sale (metrics.go)
}

type topicPartition struct {
	topic     string
	partition int32
}

// NewSink returns a sink on db and rc, configured by cfg.
func NewSink(cfg conf.Config, db *sql.DB, rc *redis.ClusterClient, log *zap.Logger) *Sink {
	s := &Sink{cfg: cfg, db: db, rc: rc, log: log.Named("sink"), lag: map[topicPartition]int64{},
		batchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_sink_batch_duration_seconds",
			Help:    "One batch of orders, from its first message read to its outcomes written back to Redis.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		})}
	s.claimed.Store(-1)
	s.setWaiting("start")
	return s
}

// setWaiting records what the sink waits for now ("" for nothing).
func (s *Sink) setWaiting(what string) { s.waiting.Store(&what) }

// Waiting says what the sink waits for at start: "" once it is consuming.
func (s *Sink) Waiting() string {
	if w := s.waiting.Load(); w != nil {
		return *w
	}
	return ""
}

// Migrate is the MySQL migration the sink runs before it consumes (schema.Migrate).
type Migrate func(context.Context) error

// Run waits for MySQL (running migrate), Redis and Kafka, each with a bounded backoff with
// jitter (sink.retry_min to sink.retry_max), then joins the consumer group and persists orders
// until ctx ends. A sink started while a service is down so waits, and drains once it is back.
func (s *Sink) Run(ctx context.Context, migrate Migrate) error {
	if migrate != nil {
		if err := s.retry(ctx, "mysql: migrate the schema", func() error {
			err := migrate(ctx)
			if err != nil {
				s.setWaiting("mysql: " + err.Error())
			}
			return err
		}); err != nil {
			return err
		}
	}
	if err := s.retry(ctx, "redis: ping every master", func() error {
		err := s.rc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
		if err != nil {
			s.setWaiting("redis: " + err.Error())
		}
		return err
	}); err != nil {
		return err
	}
	s.setWaiting("kafka: connecting")
	return s.consume(ctx)
}

// Stats returns a snapshot of the counters.
func (s *Sink) Stats() SinkStats {
	return SinkStats{Confirmed: s.confirmed.Load(), Rejected: s.rejected.Load(), Cancelled: s.cancelled.Load(), Redelivered: s.redelivered.Load(),
		DeadLetters: s.deadLetters.Load(), Batches: s.batches.Load(), Retries: s.retries.Load()}
}

// consume joins the consumer group and persists orders until ctx ends.
func (s *Sink) consume(ctx context.Context) error {
	sc, err := connect.Sarama(s.cfg.Kafka)
	if err != nil {
		return err
	}
	var group sarama.ConsumerGroup
	if err := s.retry(ctx, "connect to kafka", func() error {
		if err := connect.EnsureTopics(s.cfg.Kafka); err != nil {
			s.setWaiting("kafka: " + err.Error())
			return err
		}
		var err error
		if s.dlq == nil {
			if s.dlq, err = sarama.NewSyncProducer(s.cfg.Kafka.Brokers, sc); err != nil {
				return err
			}
		}
		group, err = sarama.NewConsumerGroup(s.cfg.Kafka.Brokers, s.cfg.Kafka.Group, sc)
		if err != nil {
			s.setWaiting("kafka: " + err.Error())
		}
		return err
	}); err != nil {
		if s.dlq != nil {
			_ = s.dlq.Close()
		}
		return err
	}
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for err := range group.Errors() {
			s.log.Warn("consumer group", zap.Error(err))
		}
	}()
	var watch sync.WaitGroup
	defer watch.Wait()
	if s.cfg.Buy.WaitReplicas > 0 {
		watch.Go(func() { s.replicas.Watch(ctx, s.rc, time.Second, s.cfg.Buy.CallTimeout, s.log) })
	}
	s.setWaiting("")
	s.log.Info("consuming", zap.String("topic", s.cfg.Kafka.Topic), zap.String("group", s.cfg.Kafka.Group))
	for ctx.Err() == nil {
		if err := group.Consume(ctx, []string{s.cfg.Kafka.Topic}, s); err != nil && ctx.Err() == nil {
			s.log.Warn("consume ended; rejoining", zap.Error(err))
			s.sleep(ctx, s.cfg.Sink.RetryMax)
		}
	}
	err = group.Close() // commits the marked offsets and leaves the group
	<-errsDone
	if derr := s.dlq.Close(); err == nil {
		err = derr
	}
	s.log.Info("stopped", zap.Any("stats", s.Stats()))
	return err
}

// Setup implements sarama.ConsumerGroupHandler: it records and logs the session's partitions.
func (s *Sink) Setup(sess sarama.ConsumerGroupSession) error {
	n := 0
	for _, ps := range sess.Claims() {
		n += len(ps)
	}
	s.claimed.Store(int64(n))
	s.log.Info("joined a group session", zap.Int32("generation", sess.GenerationID()), zap.String("member", sess.MemberID()),
		zap.Any("claims", sess.Claims()))
	return nil
}

// Cleanup implements sarama.ConsumerGroupHandler.
func (s *Sink) Cleanup(sess sarama.ConsumerGroupSession) error {
	s.claimed.Store(-1)
	s.log.Info("group session ended", zap.Int32("generation", sess.GenerationID()))
	return nil
}

// Claimed reports the number of partitions this sink holds, and whether it is in a group
// session at all (it is not while it joins or rebalances).
func (s *Sink) Claimed() (int, bool) {
	n := s.claimed.Load()
	return int(max(n, 0)), n >= 0
}

// storedBatch is a batch MySQL has committed, on its way to Redis (its outcomes) and to the
// group's offsets (its last message, marked once the outcomes are written).
type storedBatch struct {
	outcomes []Outcome
	last     *sarama.ConsumerMessage
	begun    time.Time
}

// outcomeQueue is how many committed batches may wait for their outcomes' write: MySQL goes
// on storing the partition's orders while a failover holds the outcomes of a dead master's
// sales (a few seconds), up to this many batches (sink.batch_size orders each, in memory).
const outcomeQueue = 64

// ConsumeClaim implements sarama.ConsumerGroupHandler: batches of up to sink.batch_size
// messages, each waiting at most sink.batch_linger to fill. A batch's outcomes are written to
// Redis while the next batch goes to MySQL, on a goroutine of the claim's, which then marks
// the batch's last message: a batch is marked only once both are done, in Kafka's order, so
// a sink that stops between them has the batch again, and writes its outcomes then. The
// outcomes are sent until Redis holds them (writeOutcomes); meanwhile up to outcomeQueue
// batches go on to MySQL, and are marked after it, in order.
func (s *Sink) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	ctx := sess.Context()
	defer s.dropLag(claim.Topic(), claim.Partition())
	committed := make(chan storedBatch, outcomeQueue)
	var after sync.WaitGroup
	after.Go(func() {
		held := true
		for b := range committed {
			if held = held && s.writeOutcomes(ctx, b.outcomes); !held {
				continue // the session ended first: neither this batch nor a later one is marked, they come again
			}
			s.batchLatency.Observe(time.Since(b.begun).Seconds())
			sess.MarkMessage(b.last, "")
			s.setLag(b.last.Topic, b.last.Partition, claim.HighWaterMarkOffset()-b.last.Offset-1)
		}
	})
	defer func() {
		close(committed)
		after.Wait()
	}()
	batch := make([]*sarama.ConsumerMessage, 0, s.cfg.Sink.BatchSize)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			batch = append(batch, m)
		}
		begun := time.Now()
		linger.Reset(s.cfg.Sink.BatchLinger)
	fill:
		for len(batch) < s.cfg.Sink.BatchSize {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					break fill
				}
				batch = append(batch, m)
			case <-linger.C:
				break fill
			}
		}
		linger.Stop()
		outcomes, err := s.handle(ctx, batch)
		if err != nil {
			return nil // the session ended mid-batch: nothing marked, the batch comes again
		}
		select {
		case committed <- storedBatch{outcomes: outcomes, last: batch[len(batch)-1], begun: begun}:
		case <-ctx.Done():
			return nil // not marked: the batch comes again, and its outcomes are written then
		}
		batch = make([]*sarama.ConsumerMessage, 0, s.cfg.Sink.BatchSize) // the last one is the goroutine's now
	}
}

// handle dead-letters what cannot be parsed, persists the rest and returns their outcomes,
// for writeOutcomes. It fails only when ctx ends before MySQL has committed.
func (s *Sink) handle(ctx context.Context, msgs []*sarama.ConsumerMessage) ([]Outcome, error) {
	orders := make([]sale.Order, 0, len(msgs))
	for _, m := range msgs {
		o, err := sale.DecodeOrder(m.Value)
		if err != nil {
			if err := s.deadLetter(ctx, m, err); err != nil {
				return nil, err
			}
			continue
		}
		orders = append(orders, o)
	}
	if len(orders) == 0 {
		return nil, nil
	}
	var outcomes []Outcome
	if err := s.retry(ctx, "persist orders", func() error {
		// A batch once begun is finished even if the session ends meanwhile.
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
		defer cancel()
		var err error
		outcomes, err = Persist(tctx, s.db, orders)
		return err
	}); err != nil {
		return nil, err
	}
	s.batches.Add(1)
	for _, o := range orders {
		s.sales.add(o.SKU, 1)
	}
	for _, o := range outcomes {
		switch {
		case !o.New:
			s.redelivered.Add(1)
		case o.Status == StatusConfirmed:
			s.confirmed.Add(1)
		case o.Status == StatusCancelled:
			s.cancelled.Add(1)
		default:
			s.rejected.Add(1)
		}
	}
	return outcomes, nil
}

// deadLetter sends m to the dead-letter topic with the reason in a header, retrying until
// Kafka takes it: a message is never dropped silently.
func (s *Sink) deadLetter(ctx context.Context, m *sarama.ConsumerMessage, cause error) error {
	msg := &sarama.ProducerMessage{
		Topic: s.cfg.Kafka.DeadLetterTopic,
		Key:   sarama.ByteEncoder(m.Key),
		Value: sarama.ByteEncoder(m.Value),
		Headers: []sarama.RecordHeader{
			{Key: []byte("error"), Value: []byte(cause.Error())},
			{Key: []byte("topic"), Value: []byte(m.Topic)},
			{Key: []byte("partition"), Value: []byte(strconv.FormatInt(int64(m.Partition), 10))},
			{Key: []byte("offset"), Value: []byte(strconv.FormatInt(m.Offset, 10))},
		},
	}
	err := s.retry(ctx, "dead-letter a message", func() error {
		_, _, err := s.dlq.SendMessage(msg)
		return err
	})
	if err == nil {
		s.deadLetters.Add(1)
		s.log.Warn("message dead-lettered", zap.String("topic", m.Topic), zap.Int32("partition", m.Partition),
			zap.Int64("offset", m.Offset), zap.Error(cause))
	}
	return err
}

// retry runs fn until it succeeds or ctx ends, with the jittered exponential backoff of
// internal/retry between sink.retry_min and sink.retry_max, so that many sinks restarted
// together do not retry in step.
func (s *Sink) retry(ctx context.Context, what string, fn func() error) error {
	return s.retryUpTo(ctx, what, s.cfg.Sink.RetryMax, fn)
}

// retryUpTo is retry with waits of at most ceiling (and at most sink.retry_max).
func (s *Sink) retryUpTo(ctx context.Context, what string, ceiling time.Duration, fn func() error) error {
	b := retry.New(s.cfg.Sink.RetryMin, min(ceiling, s.cfg.Sink.RetryMax))
	for {
		err := fn()
		if err == nil {
			return nil
		}
		s.retries.Add(1)
		wait := b.NextBackOff()
		s.log.Warn("retrying", zap.String("what", what), zap.Duration("in", wait), zap.Error(err))
		if !s.sleep(ctx, wait) {
			return errors.Join(ctx.Err(), err)
		}
	}
}

// sleep waits d, or less if ctx ends; it reports whether the full d passed.
func (s *Sink) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// setLag records a partition's lag after a batch.
func (s *Sink) setLag(topic string, partition int32, lag int64) {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	s.lag[topicPartition{topic, partition}] = max(0, lag)
}

// dropLag forgets a partition this sink no longer holds.
func (s *Sink) dropLag(topic string, partition int32) {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	delete(s.lag, topicPartition{topic, partition})
}
