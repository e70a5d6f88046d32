package connect

import (
	"errors"
	"fmt"
	"sync"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"

	"seckill-proxy/conf"
)

// nilMetrics sets go-metrics' switch once, before any Sarama client that reads it exists.
var nilMetrics sync.Once

// Sarama returns the Sarama client configuration for c: a pinned protocol version, and
// an idempotent producer that waits for all in-sync replicas (which needs one open request
// per broker connection). Errors are returned on the producer's Errors channel, which the
// caller must always drain; successes are returned too, for SyncProducer and the tee.
//
// Sarama's own metrics (go-metrics meters and histograms per broker and topic, updated on
// every request and message) are turned off: nothing reads them, and they cost the buy path a
// mutex and a sample per message. This is go-metrics' process-wide switch, set before the
// first configuration is made.
func Sarama(c conf.Kafka) (*sarama.Config, error) {
	nilMetrics.Do(func() { metrics.UseNilMetrics = true })
	version, err := sarama.ParseKafkaVersion(c.Version)
	if err != nil {
		return nil, fmt.Errorf("kafka.version %q: %w", c.Version, err)
	}
	sc := sarama.NewConfig()
	sc.Version = version
	sc.ClientID = c.ClientID
	sc.Net.DialTimeout = c.DialTimeout
	sc.Net.MaxOpenRequests = 1
	if m := conf.AddressMap(c.AddressMap); m != nil {
		sc.Net.Proxy.Enable = true
		sc.Net.Proxy.Dialer = Dialer{Timeout: c.DialTimeout, Map: m}
	}
	sc.Producer.Idempotent = true
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Return.Successes = true
	sc.Producer.Return.Errors = true
	sc.Producer.Partitioner = sarama.NewHashPartitioner
	sc.Producer.Retry.Max = 10
	sc.Producer.Flush.Frequency = c.Linger
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.Offsets.AutoCommit.Enable = true
	sc.Consumer.Return.Errors = true
	sc.Consumer.Group.Session.Timeout = c.SessionTimeout
	sc.Consumer.Group.Heartbeat.Interval = c.SessionTimeout / 3
	if err := kafkaTransport(sc, c); err != nil {
		return nil, err
	}
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("sarama config: %w", err)
	}
	return sc, nil
}

// EnsureTopics creates the order and dead-letter topics if they are missing, with c's
// partitions and replication factor. A consumer group that joins before its topic exists
// would not see the topic's partitions until its next metadata refresh.
func EnsureTopics(c conf.Kafka) error {
	sc, err := Sarama(c)
	if err != nil {
		return err
	}
	admin, err := sarama.NewClusterAdmin(c.Brokers, sc)
	if err != nil {
		return err
	}
	defer admin.Close()
	existing, err := admin.ListTopics()
	if err != nil {
		return err
	}
	for _, topic := range []string{c.Topic, c.DeadLetterTopic} {
		if _, ok := existing[topic]; ok {
			continue
		}
		err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(c.Partitions), ReplicationFactor: int16(c.ReplicationFactor)}, false)
		if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	return nil
}
