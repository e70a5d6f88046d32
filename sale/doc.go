// Package sale is the vocabulary that the proxy's buy path and the sink share: which Redis
// keys and channels belong to the sales, and the Redis ACL rule that keeps every other client
// from writing them.
//
// It is a leaf package: it imports nothing of this project, does no I/O, and holds no state.
package sale
