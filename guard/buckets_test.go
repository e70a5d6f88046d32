package guard

import (
	"strconv"
	"testing"

	"github.com/IBM/sarama"
)

// TestKafkaPartition: the partition WARM expects a bucket's key on is the one the producer's
// partitioner (Sarama's default, the hash partitioner) picks, for any key and count.
func TestKafkaPartition(t *testing.T) {
	hp := sarama.NewHashPartitioner("orders")
	for _, n := range []int{1, 3, 6, 7, 64} {
		for i := range 2000 {
			key := "sku_" + strconv.Itoa(i) + "#" + strconv.Itoa(i%17)
			want, err := hp.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, int32(n))
			if err != nil {
				t.Fatal(err)
			}
			if got := kafkaPartition(key, n); got != int(want) {
				t.Fatalf("kafkaPartition(%q, %d) = %d, Sarama's %d", key, n, got, want)
			}
		}
	}
}
