package guard

import (
	"testing"
	"time"
)

func TestSoldOut(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	s := NewSoldOut(2 * time.Second)
	steps := []struct {
		do   func()
		at   time.Duration
		sku  string
		want bool
	}{
		{nil, 0, "a", false},
		{func() { s.Set("a", t0) }, 0, "a", true},
		{nil, 0, "b", false},
		{nil, 1999 * time.Millisecond, "a", true},
		{nil, 2 * time.Second, "a", false}, // lapsed: the next buy asks Redis again
		{func() { s.Set("a", t0.Add(3*time.Second)) }, 4 * time.Second, "a", true},
		{func() { s.Clear("a") }, 4 * time.Second, "a", false},
		{func() { s.Clear("never-set") }, 0, "never-set", false},
	}
	for i, st := range steps {
		if st.do != nil {
			st.do()
		}
		if got := s.Is(st.sku, t0.Add(st.at)); got != st.want {
			t.Errorf("step %d: Is(%q, +%v) = %v, want %v", i, st.sku, st.at, got, st.want)
		}
	}
}
