package guard

import (
	"net"
	"sync"
)

// Shares bounds what one user and one source address hold of a resource the whole proxy has a
// bound of (outcome channels, buyers' waits), so that no single one takes it all and leaves
// every other client BUSY. Each holder is counted under its user's key and its address's; a
// take succeeds only if both stay within the most. Safe for concurrent use; the table holds
// only keys that hold something.
type Shares struct {
	most int // 0: no bound
	mu   sync.Mutex
	held map[string]int
}

// NewShares bounds each key at most (0: no bound).
func NewShares(most int) *Shares { return &Shares{most: most, held: map[string]int{}} }

// ShareKeys are the keys a client of user from remote (host:port) is counted under.
func ShareKeys(user, remote string) [2]string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return [2]string{"user " + user, "address " + host}
}

// Take counts one more under keys, or none and false if either key holds the most already.
func (s *Shares) Take(keys [2]string) bool {
	if s == nil || s.most <= 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[keys[0]] >= s.most || s.held[keys[1]] >= s.most {
		return false
	}
	s.held[keys[0]]++
	s.held[keys[1]]++
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
}

// Most is the bound of each key (0: none).
func (s *Shares) Most() int {
	if s == nil {
		return 0
	}
	return s.most
}
