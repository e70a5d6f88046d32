package upstream

import (
	"slices"
	"testing"
)

// TestMergeHistograms: cumulative counts summed over every bucket any master has; a master
// without a bucket counts its last one below it, or nothing below its first.
func TestMergeHistograms(t *testing.T) {
	a := []histBucket{{1, 3}, {4, 5}, {16, 6}}
	b := []histBucket{{2, 1}, {4, 2}, {32, 4}}
	got := mergeHistograms([][]histBucket{a, b})
	want := []histBucket{{1, 3}, {2, 4}, {4, 7}, {16, 8}, {32, 10}}
	if !slices.Equal(got, want) {
		t.Fatalf("merged %v, want %v", got, want)
	}
	if got := mergeHistograms(nil); len(got) != 0 {
		t.Fatalf("merged nothing: %v", got)
	}
}

// TestLatencyHistogramShapes: a RESP2 flat array and a RESP3 map parse alike.
func TestLatencyHistogramShapes(t *testing.T) {
	resp2 := "*4\r\n$5\r\ncalls\r\n:7\r\n$14\r\nhistogram_usec\r\n*4\r\n:1\r\n:3\r\n:2\r\n:7\r\n"
	resp3 := "%2\r\n$5\r\ncalls\r\n:7\r\n$14\r\nhistogram_usec\r\n%2\r\n:1\r\n:3\r\n:2\r\n:7\r\n"
	for _, raw := range []string{resp2, resp3} {
		calls, hist, ok := parseHistogram([]byte(raw))
		if !ok || calls != 7 || !slices.Equal(hist, []histBucket{{1, 3}, {2, 7}}) {
			t.Errorf("%q: %d %v %v", raw, calls, hist, ok)
		}
	}
	if _, _, ok := parseHistogram([]byte("*1\r\n:1\r\n")); ok {
		t.Error("a malformed entry parsed")
	}
}
