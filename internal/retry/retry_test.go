package retry

import (
	"testing"
	"time"
)

// TestNew: the waits start near the floor, grow, never pass the ceiling, and are not all the
// same (jitter).
func TestNew(t *testing.T) {
	const floor, ceiling = 100 * time.Millisecond, 5 * time.Second
	b := New(floor, ceiling)
	first := b.NextBackOff()
	if first < floor*3/4 || first > floor*5/4 {
		t.Errorf("first wait %v, want %v give or take a quarter", first, floor)
	}
	seen := map[time.Duration]bool{}
	var last time.Duration
	for range 200 {
		d := b.NextBackOff()
		if d <= 0 || d > ceiling {
			t.Fatalf("wait %v outside (0, %v]", d, ceiling)
		}
		seen[d], last = true, d
	}
	if last < ceiling/2 {
		t.Errorf("after 200 waits the wait is %v, want it near the ceiling %v", last, ceiling)
	}
	if len(seen) < 100 {
		t.Errorf("%d distinct waits of 200: no jitter", len(seen))
	}
	if d := New(time.Second, time.Millisecond).NextBackOff(); d > time.Second*5/4 {
		t.Errorf("a ceiling below the floor: wait %v, want about the floor", d)
	}
}
