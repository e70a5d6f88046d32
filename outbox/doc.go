// Package outbox carries sold orders from Redis to Kafka, on the proxy's side: the tee
// publishes each order as it is sold (an idempotent Sarama producer, acks=all) and deletes its
// outbox entry once Kafka has it; the sweeper republishes what the tee missed, from the
// sales' outbox streams, and moves aside what no one can read.
//
// It does not decide what is sold (package guard does) nor store orders in MySQL (package
// sink does).
package outbox
