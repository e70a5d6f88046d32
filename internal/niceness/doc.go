// Package niceness lowers a process's CPU priority, for a worker whose work may wait
// (seckill-sink) on a machine it shares with work that may not (the proxy, Redis, Kafka).
//
// On Linux the nice value belongs to each thread, not to the process, and a new thread takes
// its creator's: Lower sets it on every thread the process has (over /proc/self/task, until a
// pass finds none it has not set), so that the Go runtime's later threads inherit it. A nice
// value may be raised without privilege; Lower never lowers one (a process already nicer than
// asked is left as it is).
package niceness
