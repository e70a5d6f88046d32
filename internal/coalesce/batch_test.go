package coalesce

import (
	"slices"
	"testing"
)

func TestGather(t *testing.T) {
	in := make(chan int, 10)
	stop := make(chan struct{})
	for _, v := range []int{3, 2, 4, 1} {
		in <- v
	}
	size := func(v int) int { return v }
	// 3+2 = 5 < 6, +4 = 9: the batch closes once the sizes reach max.
	got, ok := Gather(stop, in, nil, 6, size)
	if !ok || !slices.Equal(got, []int{3, 2, 4}) {
		t.Fatalf("first batch %v, %v", got, ok)
	}
	// Only what is waiting: no blocking for more.
	got, ok = Gather(stop, in, got, 6, size)
	if !ok || !slices.Equal(got, []int{1}) {
		t.Fatalf("second batch %v, %v", got, ok)
	}
	close(stop)
	if got, ok = Gather(stop, in, got, 6, size); ok || len(got) != 0 {
		t.Fatalf("after stop: %v, %v", got, ok)
	}
}
