package guard

// Kinds of outbox entries.
const (
	KindOrder   = "order"
	KindRelease = "release"
)

// Sold is one outbox entry on its way to Kafka: an order the buy script sold, or the release
// of one.
type Sold struct {
	// Kind is KindOrder or KindRelease.
	Kind    string
	OrderID string
	SKU     string
	UID     string
	Qty     int64
	// Version is the sale version the order was made in.
	Version int64
	// EntryID is the order's entry in the SKU's outbox stream: delete it once Kafka has the
	// order.
	EntryID string
	// TS is the Redis server time of the buy, Unix milliseconds.
	TS int64
	// By names the proxy that made the order.
	By string
}

// Publisher takes sold orders on to Kafka (the tee in package sink). Publish must not block:
// an order it cannot take now stays in the outbox for the sweeper. done, if not nil, is called
// once with nil when Kafka has acknowledged the order, or with the reason it has not.
type Publisher interface {
	Publish(s Sold, done func(error))
	// Healthy reports whether Kafka has been taking orders lately.
	Healthy() bool
}
