package sink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/xid"
	"go.uber.org/zap"

	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/sale"
)

// BenchmarkSink measures one sink process end to end: b.N orders already in a topic of their
// own, consumed, stored in MariaDB under the hard stock constraint, their outcomes written to
// Redis and their offsets marked. Run it with -benchtime=100000x or so.
func BenchmarkSink(b *testing.B) {
	cfg := testenv.Config(b)
	cfg.Kafka.Brokers = testenv.Kafka(b)
	testenv.Redis(b)
	db := migrated(b)
	id := xid.New().String()
	cfg.Kafka.Topic, cfg.Kafka.DeadLetterTopic, cfg.Kafka.Group = "bench."+id, "bench."+id+".dlq", "bench-"+id
	b.Cleanup(func() { testenv.DeleteTopics(b, cfg.Kafka.Brokers, cfg.Kafka.Topic, cfg.Kafka.DeadLetterTopic) })
	sku := newItem(b, db, b.N)
	if err := connect.EnsureTopics(cfg.Kafka); err != nil {
		b.Fatal(err)
	}
	sc, err := connect.Sarama(cfg.Kafka)
	if err != nil {
		b.Fatal(err)
	}
	p, err := sarama.NewAsyncProducer(cfg.Kafka.Brokers, sc)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for e := range p.Errors() {
			b.Error(e.Err)
		}
	}()
	go func() {
		for range p.Successes() {
		}
	}()
	for i := range b.N {
		o := order(sku, fmt.Sprintf("u%d", i), 1)
		p.Input() <- &sarama.ProducerMessage{Topic: cfg.Kafka.Topic, Key: sarama.StringEncoder(sku), Value: sarama.ByteEncoder(o.Encode())}
	}
	if err := p.Close(); err != nil {
		b.Fatal(err)
	}
	rc := connect.Redis(cfg.Redis)
	defer rc.Close()
	defer rc.Del(context.Background(), sale.KeysFor(sku).Result)
	s := NewSink(cfg, db, rc, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() { done <- s.Run(ctx, nil) }()
	for s.Stats().Confirmed < int64(b.N) {
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "orders/s")
}
