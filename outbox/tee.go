package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/retry"
	"seckill-proxy/internal/salescan"
	"seckill-proxy/sale"
)

// Errors a publish can end with before it reaches Kafka. The order stays in its outbox, and
// the sweeper republishes it.
var (
	ErrNotConnected = errors.New("kafka producer not connected")
	ErrBacklog      = errors.New("kafka producer backlog is full")
	ErrClosed       = errors.New("tee is closed")
)

// queueSize is how many orders may wait for the producer.
const queueSize = 1 << 16

// probeAfter is how long after a Kafka error the tee reports unhealthy, unless a send
// succeeds first; then it lets orders through again to probe.
const probeAfter = 5 * time.Second

// TeeStats are the tee's counters.
type TeeStats struct {
	Published, Acked, Failed, Deleted, DeleteErrors int64
}

// Tee publishes sold orders to Kafka with an idempotent Sarama AsyncProducer (acks=all), and
// deletes each order's outbox entry once Kafka has acknowledged it, many at a time. It never
// blocks a buy: an order it cannot take now stays in the outbox for the sweeper.
//
// Tee implements guard.Publisher. It is safe for concurrent use. Build it with NewTee, start it
// with Start, and stop it with Close, which flushes what the producer holds.
type Tee struct {
	rc       *redis.ClusterClient
	kafka    conf.Kafka
	outbox   conf.Outbox
	instance string
	log      *zap.Logger

	mu       sync.RWMutex
	producer sarama.AsyncProducer
	closing  bool

	lastOK, lastErr, lastLogged atomic.Int64 // Unix nanoseconds
	published, acked, failed    atomic.Int64
	deleted, deleteErrs         atomic.Int64

	// queue holds batches of orders for the producer, whose Input channel is unbuffered;
	// queued counts their orders. A full queue leaves orders in their outboxes rather than
	// blocking a buy. A batch (the orders an event loop sold in one turn) costs one hand-off
	// between threads, not one per order.
	queue     chan []*sarama.ProducerMessage
	queued    atomic.Int64
	deletes   chan entryRef
	stop      chan struct{}
	producers sync.WaitGroup // the connector and the drains: they send on deletes
	flusher   sync.WaitGroup
}

// entryRef is an outbox entry: the hash tag of its bucket (sale.Sold.Tag), and its id.
type entryRef struct{ tag, id string }

type pending struct {
	entry entryRef
	done  func(error)
}

// NewTee returns a tee that publishes to c.Kafka.Topic on behalf of instance.
func NewTee(rc *redis.ClusterClient, c conf.Config, instance string, log *zap.Logger) *Tee {
	return &Tee{
		rc: rc, kafka: c.Kafka, outbox: c.Outbox, instance: instance, log: log.Named("tee"),
		queue:   make(chan []*sarama.ProducerMessage, queueSize),
		deletes: make(chan entryRef, 1<<16),
		stop:    make(chan struct{}),
	}
}

// Start connects the producer in the background, retrying until Kafka answers or Close.
func (t *Tee) Start() error {
	sc, err := connect.Sarama(t.kafka)
	if err != nil {
		return err
	}
	t.flusher.Go(t.flushDeletes)
	t.producers.Go(func() { t.connect(sc) })
	return nil
}

func (t *Tee) connect(sc *sarama.Config) {
	wait := retry.New(200*time.Millisecond, 5*time.Second)
	for {
		p, err := sarama.NewAsyncProducer(t.kafka.Brokers, sc)
		if err == nil {
			t.mu.Lock()
			if t.closing {
				t.mu.Unlock()
				_ = p.Close()
				return
			}
			t.producer = p
			t.mu.Unlock()
			t.producers.Go(func() { t.drainSuccesses(p) })
			t.producers.Go(func() { t.drainErrors(p) })
			t.producers.Go(func() { t.forward(p) })
			t.log.Info("kafka producer connected", zap.Strings("brokers", t.kafka.Brokers), zap.String("topic", t.kafka.Topic))
			return
		}
		t.noteErr("kafka producer cannot connect; orders wait in the outboxes", err)
		select {
		case <-t.stop:
			return
		case <-time.After(wait.NextBackOff()):
		}
	}
}

// Partitions asks Kafka how many partitions the orders topic has (a client of its own, closed
// after; a topic not there yet is created as the broker creates one on first use).
func (t *Tee) Partitions() (int, error) {
	sc, err := connect.Sarama(t.kafka)
	if err != nil {
		return 0, err
	}
	c, err := sarama.NewClient(t.kafka.Brokers, sc)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ps, err := c.Partitions(t.kafka.Topic)
	return len(ps), err
}

// Route is where the tee sends orders (sale.Route of its topic).
func (t *Tee) Route() string { return sale.Route(t.kafka.Topic) }

// Publish implements guard.Publisher.
func (t *Tee) Publish(s sale.Sold, done func(error)) {
	t.enqueue([]*sarama.ProducerMessage{t.message(s, done)})
}

// PublishBatch implements guard.Publisher: many orders, handed to the producer together.
func (t *Tee) PublishBatch(ss []sale.Sold) {
	msgs := make([]*sarama.ProducerMessage, len(ss))
	for i, s := range ss {
		msgs[i] = t.message(s, nil)
	}
	t.enqueue(msgs)
}

// message is s as a Kafka message, keyed by its bucket's tag: the SKU for a sale of one
// bucket, "<sku>#<t>" for bucket t of a split one, so that a split sale's orders spread over
// partitions while each bucket's stay in order.
func (t *Tee) message(s sale.Sold, done func(error)) *sarama.ProducerMessage {
	kind := s.Kind
	if kind == "" {
		kind = sale.TypeOrder
	}
	o := sale.Order{V: sale.MessageVersion, Type: kind, OrderID: s.OrderID, SaleVersion: s.Version,
		SKU: s.SKU, UID: s.UID, Qty: s.Qty, TS: s.TS, Proxy: s.By, Bucket: s.Bucket, Home: s.Home}
	tag := s.Tag()
	return &sarama.ProducerMessage{
		Topic:    t.kafka.Topic,
		Key:      sarama.StringEncoder(tag),
		Value:    sarama.ByteEncoder(o.Encode()),
		Metadata: &pending{entry: entryRef{tag: tag, id: s.EntryID}, done: done},
	}
}

// enqueue queues msgs for the producer, or fails them (they stay in their outboxes).
func (t *Tee) enqueue(msgs []*sarama.ProducerMessage) {
	n := int64(len(msgs))
	t.mu.RLock()
	err := ErrClosed
	if !t.closing {
		err = ErrNotConnected
		if t.producer != nil {
			err = ErrBacklog
			if t.queued.Add(n) <= queueSize {
				select {
				case t.queue <- msgs:
					err = nil
				default:
				}
			}
			if err != nil {
				t.queued.Add(-n)
			}
		}
	}
	t.mu.RUnlock()
	if err != nil {
		for _, m := range msgs {
			t.failOrder(m, err)
		}
		return
	}
	t.published.Add(n)
}

// Healthy implements guard.Publisher: the producer is connected, and its last error is older
// than its last success, or older than a few seconds.
func (t *Tee) Healthy() bool {
	t.mu.RLock()
	connected := t.producer != nil && !t.closing
	t.mu.RUnlock()
	lastErr := t.lastErr.Load()
	return connected && (lastErr <= t.lastOK.Load() || time.Since(time.Unix(0, lastErr)) > probeAfter)
}

// Stats returns a snapshot of the counters.
func (t *Tee) Stats() TeeStats {
	return TeeStats{Published: t.published.Load(), Acked: t.acked.Load(), Failed: t.failed.Load(),
		Deleted: t.deleted.Load(), DeleteErrors: t.deleteErrs.Load()}
}

// forward feeds the producer from the queue until Close closes the queue, then flushes the
// producer, which ends the drains.
func (t *Tee) forward(p sarama.AsyncProducer) {
	for msgs := range t.queue {
		t.queued.Add(-int64(len(msgs)))
		for _, m := range msgs {
			p.Input() <- m
		}
	}
	p.AsyncClose()
}

func (t *Tee) drainSuccesses(p sarama.AsyncProducer) {
	for m := range p.Successes() {
		t.lastOK.Store(time.Now().UnixNano())
		t.acked.Add(1)
		pend := m.Metadata.(*pending)
		if pend.done != nil {
			pend.done(nil)
		}
		t.deletes <- pend.entry
	}
}

func (t *Tee) drainErrors(p sarama.AsyncProducer) {
	for e := range p.Errors() {
		t.noteErr("kafka did not take an order; it stays in the outbox", e.Err)
		t.failOrder(e.Msg, e.Err)
	}
}

// noteErr records a Kafka error, and logs at most one a second.
func (t *Tee) noteErr(msg string, err error) {
	now := time.Now().UnixNano()
	t.lastErr.Store(now)
	if last := t.lastLogged.Load(); now-last > int64(time.Second) && t.lastLogged.CompareAndSwap(last, now) {
		t.log.Warn(msg, zap.Error(err), zap.Int64("failed_so_far", t.failed.Load()))
	}
}

// flushDeletes removes acknowledged entries from their outboxes, batched per flush interval.
// An entry whose delete fails is only published again by the sweeper: harmless.
func (t *Tee) flushDeletes() {
	batch := map[string][]string{}
	n := 0
	flush := func() {
		if n == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		t.deleteBatch(ctx, batch)
		clear(batch)
		n = 0
	}
	// The timer runs only while entries wait: an idle proxy is not woken every DeleteFlush.
	timer := time.NewTimer(t.outbox.DeleteFlush)
	timer.Stop()
	defer timer.Stop()
	armed := false
	for {
		select {
		case ref, ok := <-t.deletes:
			if !ok {
				flush()
				return
			}
			batch[ref.tag] = append(batch[ref.tag], ref.id)
			if n++; n >= 1024 {
				flush()
			} else if !armed {
				timer.Reset(t.outbox.DeleteFlush)
				armed = true
			}
		case <-timer.C:
			armed = false
			flush()
		}
	}
}

// deleteBatch deletes the outbox entries of batch (tag -> ids): one xdel.lua call per master
// for every bucket it owns, so that orders spread over many sales cost a command per master,
// not one per sale; a bucket that call could not touch (its slot moved) gets an XDEL of its
// own, which follows the redirect. Entries not deleted stay for the sweeper, which publishes
// them again.
func (t *Tee) deleteBatch(ctx context.Context, batch map[string][]string) {
	tags := make([]string, 0, len(batch))
	for tag := range batch {
		tags = append(tags, tag)
	}
	var slow []string
	groups, errs := salescan.ByMaster(ctx, t.rc, tags)
	for i := range errs {
		slow = append(slow, tags[i])
	}
	for _, g := range groups {
		args := []any{sale.SaleKeyPrefix}
		for _, i := range g.Idx {
			ids := batch[tags[i]]
			args = append(args, tags[i], len(ids))
			for _, id := range ids {
				args = append(args, id)
			}
		}
		v, err := xdelScript.Run(ctx, g.Client, nil, args...).Slice()
		if err == nil && len(v) != len(g.Idx) {
			err = fmt.Errorf("xdel.lua answered %d values for %d buckets", len(v), len(g.Idx))
		}
		for j, i := range g.Idx {
			if err != nil {
				slow = append(slow, tags[i])
				continue
			}
			if d, ok := v[j].(int64); ok {
				t.deleted.Add(d)
			} else {
				slow = append(slow, tags[i])
			}
		}
		if err != nil {
			t.log.Debug("could not delete acknowledged outbox entries in one call; deleting them one bucket at a time", zap.String("master", g.Client.Options().Addr), zap.Error(err))
		}
	}
	if len(slow) == 0 {
		return
	}
	pipe := t.rc.Pipeline()
	cmds := make([]*redis.IntCmd, 0, len(slow))
	for _, tag := range slow {
		cmds = append(cmds, pipe.XDel(ctx, sale.Key(tag, "outbox"), batch[tag]...))
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			t.deleteErrs.Add(1)
			t.log.Warn("could not delete acknowledged outbox entries; the sweeper will publish them again", zap.Error(err))
			continue
		}
		t.deleted.Add(c.Val())
	}
}

// Close stops taking orders, waits until the producer has delivered (or failed) what it
// holds, and deletes the acknowledged outbox entries.
func (t *Tee) Close() error {
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		return nil
	}
	t.closing = true
	connected := t.producer != nil
	close(t.queue) // no Publish sends once closing is set
	t.mu.Unlock()
	close(t.stop)
	if !connected {
		// Nothing was taken: every order is still in its outbox.
		for msgs := range t.queue {
			for _, m := range msgs {
				t.failOrder(m, ErrClosed)
			}
		}
	}
	t.producers.Wait() // the forwarder flushes the producer; the drains end when it is closed
	close(t.deletes)
	t.flusher.Wait()
	return nil
}

// ErrCloseTimeout is CloseWithin's error when Kafka did not take the orders in time.
var ErrCloseTimeout = errors.New("the tee did not flush to Kafka in time; its orders stay in their outboxes for a sweeper to republish")

// CloseWithin is Close, waiting at most d: past it, it returns ErrCloseTimeout and leaves the
// producer to finish or fail on its own. No order is lost either way: an order leaves its
// sale's outbox only once Kafka has acknowledged it.
func (t *Tee) CloseWithin(d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- t.Close() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return ErrCloseTimeout
	}
}

func (t *Tee) failOrder(msg *sarama.ProducerMessage, err error) {
	t.failed.Add(1)
	if pend, ok := msg.Metadata.(*pending); ok && pend.done != nil {
		pend.done(err)
	}
}

// InfoFields are the tee's counters for INFO and SECKILL.INFO.
func (t *Tee) InfoFields() []guard.Field {
	st := t.Stats()
	healthy := int64(0)
	if t.Healthy() {
		healthy = 1
	}
	return []guard.Field{
		{Name: "kafka_healthy", Value: healthy, Metric: &guard.Metric{Name: "seckill_proxy_kafka_healthy", Help: "1 while the tee's Kafka producer is taking orders.", Gauge: true}},
		{Name: "kafka_published", Value: st.Published, Metric: &guard.Metric{Name: "seckill_proxy_kafka_published_total", Help: "Orders handed to the Kafka producer (sweeper republishes included)."}},
		{Name: "kafka_acked", Value: st.Acked, Metric: &guard.Metric{Name: "seckill_proxy_kafka_acked_total", Help: "Orders Kafka acknowledged."}},
		{Name: "kafka_failed", Value: st.Failed, Metric: &guard.Metric{Name: "seckill_proxy_kafka_failed_total", Help: "Orders Kafka refused or timed out (they stay in the outbox)."}},
		{Name: "outbox_deleted", Value: st.Deleted, Metric: &guard.Metric{Name: "seckill_proxy_outbox_deleted_total", Help: "Outbox entries deleted after Kafka's acknowledgement."}},
		{Name: "kafka_queued", Value: t.queued.Load(), Metric: &guard.Metric{Name: "seckill_proxy_kafka_queue", Help: "Orders waiting for the Kafka producer.", Gauge: true}},
	}
}
