// Package sink is the consumer side of the order pipeline (the seckill-sink binary): a Kafka
// consumer group that persists each order into MySQL under the hard stock constraint, a
// batch per transaction, and writes each order's outcome back to the sale in Redis.
//
// sink never decides whether a buyer got stock: that was decided atomically in Redis, and
// MySQL's constraint is only the last line of defence. It shares the sale's vocabulary
// (keys, message codec) through package sale, and knows nothing of the proxy's buy engine.
package sink
