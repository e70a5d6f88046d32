package guard

import (
	"net"
	"sync"
)

// Shares bounds what one user and one source address hold of a resource the whole proxy has a
// bound of (outcome channels, buyers' waits), so that no single one takes it all and leaves
// every other client BUSY. Each holder is counted under its user's key and its address's; a
// take succeeds if both stay within the most, or, past it, while the whole proxy holds less
// than its pool less one share: one share is always left for another user or address. A
// sidecar serves one user from one address, so its own clients may take the pool but a share
// (before, 26 connections of that user took the user's whole share, a quarter of the pool,
// and every other client of the sidecar got BUSY); a second tenant still finds a share free.
// Each connection is bounded on its own besides (limits.outcome_channels_per_conn). Safe for
// concurrent use; the table holds only keys that hold something.
type Shares struct {
	most  int // 0: no bound
	pool  int // the proxy's bound of the resource (0: none known: most is a hard bound)
	mu    sync.Mutex
	held  map[string]int
	total int // holders, each counted once
}

// NewShares bounds each key at most (0: no bound), of a pool of pool (0: most is hard).
func NewShares(most, pool int) *Shares {
	return &Shares{most: most, pool: pool, held: map[string]int{}}
}

// ShareKeys are the keys a client of user from remote (host:port) is counted under.
func ShareKeys(user, remote string) [2]string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return [2]string{"user " + user, "address " + host}
}

// Take counts one more under keys, or none and false if either key holds the most already
// and the pool has no more than a share left.
func (s *Shares) Take(keys [2]string) bool {
	if s == nil || s.most <= 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if (s.held[keys[0]] >= s.most || s.held[keys[1]] >= s.most) && (s.pool <= 0 || s.total+1 > s.pool-s.most) {
		return false
	}
	s.held[keys[0]]++
	s.held[keys[1]]++
	s.total++
	return true
}

// Release counts n fewer under keys, which took them.
func (s *Shares) Release(keys [2]string, n int) {
	if s == nil || s.most <= 0 || n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if s.held[k] -= n; s.held[k] <= 0 {
			delete(s.held, k)
		}
	}
	s.total = max(0, s.total-n)
}

// Most is the bound of each key (0: none).
func (s *Shares) Most() int {
	if s == nil {
		return 0
	}
	return s.most
}
