// Package guard protects a sale's stock: argument checks, the in-process sold-out flags,
// the atomic Lua scripts on the Redis Cluster and their callers, and the warm-up of a sale
// from MySQL into Redis.
//
// The key layout, the sale states and the ID rules are package sale's: every key of a SKU
// carries the hash tag {<sku>} so that one script can touch them all in one cluster slot.
// guard does not speak RESP to clients, and hands sold orders to a Publisher (package outbox)
// rather than to Kafka itself.
package guard
