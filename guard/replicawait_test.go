package guard

import (
	"strings"
	"testing"
)

// TestWaitCommand: a WAIT asks for buy.wait_replicas, or fewer when the master has fewer in
// the cluster's view, and none on a master with none (-1: its buys go as buy.no_replica
// says); a master the view does not know is taken to have them. WaitReply says whether the
// count came back.
func TestWaitCommand(t *testing.T) {
	g := &Guard{}
	g.opt.Buy.WaitReplicas = 2
	g.opt.Buy.WaitTimeout = 500e6
	for _, tt := range []struct {
		view map[string]int
		addr string
		want int
	}{
		{nil, "a", 2},
		{map[string]int{"a": 1}, "a", 1},
		{map[string]int{"a": 3}, "a", 2},
		{map[string]int{"a": 0}, "a", -1},
		{map[string]int{"a": 0}, "b", 2},
	} {
		if tt.view != nil {
			g.replicaView.Set(tt.view)
		}
		cmd, n := g.WaitCommand(tt.addr)
		if n != tt.want || (n <= 0) != (cmd == nil) {
			t.Fatalf("view %v, master %s: WAIT %q for %d, want %d", tt.view, tt.addr, cmd, n, tt.want)
		}
		if n > 0 && !strings.HasSuffix(string(cmd), "$3\r\n500\r\n") {
			t.Fatalf("WAIT %q: want a 500 ms timeout", cmd)
		}
	}
	for raw, want := range map[string]bool{":1\r\n": true, ":2\r\n": true, ":0\r\n": false, "-ERR x\r\n": false, "$1\r\nx\r\n": false} {
		if got := g.WaitReply([]byte(raw), 1); got != want {
			t.Errorf("WaitReply(%q, 1) = %v, want %v", raw, got, want)
		}
	}
}
