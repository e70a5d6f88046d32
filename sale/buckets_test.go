package sale

import (
	"strconv"
	"strings"
	"testing"
)

// TestBucketKeys: bucket 0 is the sale's own keys; any other bucket's keys all share one hash
// tag of their own, {<sku>#<t>}.
func TestBucketKeys(t *testing.T) {
	if BucketKeys("phone", 0) != KeysFor("phone") {
		t.Fatal("bucket 0 is not the sale's own keys")
	}
	for _, kv := range BucketKeys("phone", 7).Named() {
		if !strings.HasPrefix(kv[1], "seckill:{phone#7}:") {
			t.Errorf("%s: %q, want the tag {phone#7}", kv[0], kv[1])
		}
	}
}

// TestHome: a buyer's home is fixed (these values must never change: a sale's buyers live
// where they were put), in range, and the uids spread evenly.
func TestHome(t *testing.T) {
	for _, c := range []struct {
		uid  string
		k    int
		want int
	}{{"alice", 3, 2}, {"bob", 3, 2}, {"user_123456", 16, 0}, {"u1", 3, 0}, {"u1", 1, 0}, {"u1", 0, 0}} {
		if got := Home(c.uid, c.k); got != c.want {
			t.Errorf("Home(%q, %d) = %d, want %d (FNV-1a of the uid, mod k)", c.uid, c.k, got, c.want)
		}
	}
	counts := make([]int, 3)
	for i := range 30000 {
		counts[Home("user_"+strconv.Itoa(i), 3)]++
	}
	for b, n := range counts {
		if n < 9500 || n > 10500 {
			t.Errorf("bucket %d holds %d of 30,000 uids, want about 10,000", b, n)
		}
	}
}

func TestParseBuckets(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // FormatBuckets of the result, or "error"
	}{
		{"", "0"}, {"0", "0"}, {"0,3,7", "0,3,7"},
		{"3,0", "error"}, {"0,0", "error"}, {"0,-1", "error"}, {"0,07", "error"}, {"0,x", "error"},
		{"0,,1", "error"}, {"0,+1", "error"}, {"0, 1", "error"}, {"0,12345", "error"}, {"0," + strings.Repeat("1,", 16), "error"},
	} {
		tags, err := ParseBuckets(c.in)
		got := "error"
		if err == nil {
			got = FormatBuckets(tags)
		}
		if got != c.want {
			t.Errorf("ParseBuckets(%q) = %s (%v), want %s", c.in, got, err, c.want)
		}
	}
}

// FuzzParseBuckets: any field is refused or read back to itself, within the bounds, and
// every buyer's home is one of its buckets.
func FuzzParseBuckets(f *testing.F) {
	for _, s := range []string{"", "0", "0,3,7", "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", "3,0", "0,07"} {
		f.Add(s, "u1")
	}
	f.Fuzz(func(t *testing.T, s, uid string) {
		tags, err := ParseBuckets(s)
		if err != nil {
			return
		}
		if len(tags) == 0 || len(tags) > MaxBuckets || tags[0] != 0 {
			t.Fatalf("ParseBuckets(%q) = %v", s, tags)
		}
		if s != "" && FormatBuckets(tags) != s {
			t.Fatalf("ParseBuckets(%q) reads back as %q", s, FormatBuckets(tags))
		}
		if h := Home(uid, len(tags)); h < 0 || h >= len(tags) {
			t.Fatalf("Home(%q, %d) = %d", uid, len(tags), h)
		}
	})
}
