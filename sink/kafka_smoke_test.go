package sink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/testenv"
)

type collectHandler struct{ got chan *sarama.ConsumerMessage }

func (collectHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (collectHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h collectHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		select {
		case h.got <- m:
		case <-s.Context().Done():
			return nil
		}
	}
	return nil
}

// TestKafkaSmoke proves Kafka is real: an idempotent SyncProducer with acks=all writes a
// message to a new topic, and a consumer group reads that same message back.
func TestKafkaSmoke(t *testing.T) {
	cfg := testenv.Config(t)
	cfg.Kafka.Brokers = testenv.Kafka(t)
	sc, err := connect.Sarama(cfg.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Producer.Idempotent || sc.Producer.RequiredAcks != sarama.WaitForAll || sc.Net.MaxOpenRequests != 1 {
		t.Fatalf("producer is not idempotent with acks=all: %+v", sc.Producer)
	}
	topic := fmt.Sprintf("smoke-%d", time.Now().UnixNano())
	admin, err := sarama.NewClusterAdmin(cfg.Kafka.Brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.DeleteTopic(topic) }()

	producer, err := sarama.NewSyncProducer(cfg.Kafka.Brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("hello %d", time.Now().UnixNano())
	_, offset, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder(want)})
	if err != nil {
		t.Fatal(err)
	}
	if err := producer.Close(); err != nil {
		t.Fatal(err)
	}

	group, err := sarama.NewConsumerGroup(cfg.Kafka.Brokers, topic+"-group", sc)
	if err != nil {
		t.Fatal(err)
	}
	defer group.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := collectHandler{got: make(chan *sarama.ConsumerMessage, 1)}
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{topic}, h); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case m := <-h.got:
		if string(m.Value) != want || m.Offset != offset {
			t.Fatalf("read %q at offset %d, want %q at %d", m.Value, m.Offset, want, offset)
		}
	case <-ctx.Done():
		t.Fatal("the consumer group read nothing within 60s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
