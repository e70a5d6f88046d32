// Package connect builds the clients of Redis and Kafka from the configuration, in one place,
// so that every binary and every package talks to them with the same settings: a go-redis
// ClusterClient that survives a failover (its slot map reloaded about every second), and a
// Sarama configuration with an idempotent producer that waits for every in-sync replica.
//
// It holds no state. The pass-through's own raw connections (package upstream) take their
// timeouts from the same conf.Redis.
package connect
