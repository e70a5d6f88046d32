package sale

// Sold is one outbox entry on its way to Kafka: an order the buy script sold, or the release
// of one.
type Sold struct {
	// Kind is TypeOrder or TypeRelease.
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
	// Bucket is the tag number of the stock bucket that sold the order, whose outbox holds
	// its entry; Home the tag number of the buyer's home bucket, which holds the buyer and
	// the outcome. Both 0 for a sale of one bucket.
	Bucket, Home int
}

// Tag is the hash tag of the bucket that sold s: its outbox's.
func (s Sold) Tag() string { return Tag(s.SKU, s.Bucket) }
