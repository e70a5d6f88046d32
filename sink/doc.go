// Package sink moves orders from Redis to MySQL: on the proxy's side, the Kafka tee and the
// outbox relay; on the other, the Kafka consumer that persists each order into MySQL under
// the hard stock constraint and writes its outcome back to Redis.
//
// sink never decides whether a buyer got stock; that was decided atomically in Redis, and
// MySQL's constraint is only the last line of defence.
package sink
