// Package sale is the vocabulary that the proxy's buy path, its outbox and the sink share:
// the Redis keys of a sale and which keys and channels belong to the sales, the sale states,
// the rules for SKUs and uids, the order message on Kafka, and the Redis ACL rule that keeps
// every other client from writing the sales.
//
// It is a leaf package: it imports nothing of this project, does no I/O, and holds no state.
package sale
