package niceness

import "testing"

// TestLowerRefusesOutOfRange: a nice value below 0 asks for privilege, above 19 is none.
func TestLowerRefusesOutOfRange(t *testing.T) {
	for _, n := range []int{-1, 20, -20} {
		if _, err := Lower(n); err == nil {
			t.Errorf("Lower(%d) = nil error", n)
		}
	}
}
