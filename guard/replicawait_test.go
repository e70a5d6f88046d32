package guard

import (
	"testing"
	"time"
)

// TestReplicaWaits: a WAIT that no replica acknowledged turns WAIT off on that master for
// waitProbe, and only on that master; the WAIT after it is a probe; a WAIT that some replica
// acknowledged keeps it on.
func TestReplicaWaits(t *testing.T) {
	var w replicaWaits
	t0 := time.Unix(1000, 0)
	for _, step := range []struct {
		at    time.Duration
		acked int64 // -2: no WAIT this step
		addr  string
		want  bool
	}{
		{0, -2, "a", true},
		{0, 0, "a", false},
		{0, -2, "b", true},
		{waitProbe - time.Millisecond, -2, "a", false},
		{waitProbe, -2, "a", true},
		{waitProbe, -1, "a", false}, // a failed WAIT turns it off too
		{2*waitProbe + time.Millisecond, 1, "a", true},
		{2*waitProbe + 2*time.Millisecond, -2, "a", true},
	} {
		now := t0.Add(step.at)
		if step.acked != -2 {
			w.acked(step.addr, step.acked, now)
		}
		if got := w.on(step.addr, now); got != step.want {
			t.Fatalf("at %v on %s (acked %d): on = %v, want %v", step.at, step.addr, step.acked, got, step.want)
		}
	}
}
