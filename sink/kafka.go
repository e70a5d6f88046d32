package sink

import (
	"fmt"

	"github.com/IBM/sarama"

	"seckill-proxy/conf"
)

// SaramaConfig returns the Sarama client configuration for c: a pinned protocol version, and
// an idempotent producer that waits for all in-sync replicas (which needs one open request
// per broker connection). Errors are returned on the producer's Errors channel, which the
// caller must always drain; successes are returned too, for SyncProducer and the tee.
func SaramaConfig(c conf.Kafka) (*sarama.Config, error) {
	version, err := sarama.ParseKafkaVersion(c.Version)
	if err != nil {
		return nil, fmt.Errorf("kafka.version %q: %w", c.Version, err)
	}
	sc := sarama.NewConfig()
	sc.Version = version
	sc.ClientID = c.ClientID
	sc.Net.DialTimeout = c.DialTimeout
	sc.Net.MaxOpenRequests = 1
	sc.Producer.Idempotent = true
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Return.Successes = true
	sc.Producer.Return.Errors = true
	sc.Producer.Partitioner = sarama.NewHashPartitioner
	sc.Producer.Retry.Max = 10
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.Offsets.AutoCommit.Enable = true
	sc.Consumer.Return.Errors = true
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("sarama config: %w", err)
	}
	return sc, nil
}
