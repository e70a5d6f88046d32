package guard

import (
	"slices"
	"testing"
)

// TestLatePassOrder: each pass of the late-order watch starts after the sale the last one
// looked at, and goes round, so that passes that run out of time still reach every sale.
func TestLatePassOrder(t *testing.T) {
	for _, c := range []struct {
		skus  []string
		after string
		want  []string
	}{
		{[]string{"c", "a", "b"}, "", []string{"a", "b", "c"}},
		{[]string{"c", "a", "b"}, "a", []string{"b", "c", "a"}},
		{[]string{"c", "a", "b"}, "c", []string{"a", "b", "c"}},
		{[]string{"c", "a", "d"}, "b", []string{"c", "d", "a"}}, // b left the set meanwhile
		{nil, "x", []string{}},
	} {
		if got := latePassOrder(slices.Clone(c.skus), c.after); !slices.Equal(got, c.want) {
			t.Errorf("latePassOrder(%v, %q) = %v, want %v", c.skus, c.after, got, c.want)
		}
	}
}
