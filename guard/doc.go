// Package guard protects a sale's stock: argument checks, the in-process sold-out flags,
// the atomic Lua scripts on the Redis Cluster and their callers, and the warm-up of a sale
// from MySQL into Redis.
//
// guard owns the key layout: every key of a SKU carries the hash tag {<sku>} so that one
// script can touch them all in one cluster slot. It does not speak RESP to clients and does
// not publish to Kafka.
package guard
