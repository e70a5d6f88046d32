package guard

import "seckill-proxy/sale"

// Publisher takes sold orders on to Kafka (the tee in package outbox). Publish must not block:
// an order it cannot take now stays in the outbox for the sweeper. done, if not nil, is called
// once with nil when Kafka has acknowledged the order, or with the reason it has not.
type Publisher interface {
	Publish(s sale.Sold, done func(error))
	// PublishBatch takes many orders at once, none waited for: as Publish with done nil.
	PublishBatch(ss []sale.Sold)
	// Healthy reports whether Kafka has been taking orders lately.
	Healthy() bool
}

// PartitionCounter is a Publisher that can say how many partitions its topic has (the tee
// asks Kafka), for WARM's choice of a split sale's bucket tags.
type PartitionCounter interface {
	Partitions() (int, error)
}
