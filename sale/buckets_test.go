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

// TestTags: Tag and SplitTag are each other's inverse, and a tag of no bucket number is the
// sale's own.
func TestTags(t *testing.T) {
	for _, c := range []struct {
		sku string
		t   int
		tag string
	}{{"phone", 0, "phone"}, {"phone", 7, "phone#7"}, {"p", 9999, "p#9999"}} {
		if got := Tag(c.sku, c.t); got != c.tag {
			t.Errorf("Tag(%q, %d) = %q, want %q", c.sku, c.t, got, c.tag)
		}
		if sku, n := SplitTag(c.tag); sku != c.sku || n != c.t {
			t.Errorf("SplitTag(%q) = %q, %d", c.tag, sku, n)
		}
		if KeysFor(c.tag) != BucketKeys(c.sku, c.t) {
			t.Errorf("KeysFor(%q) is not bucket %d's keys", c.tag, c.t)
		}
	}
	for _, bad := range []string{"phone#", "phone#x", "phone#-1", "phone#+1"} {
		if _, n := SplitTag(bad); n != 0 {
			t.Errorf("SplitTag(%q) = %d, want 0", bad, n)
		}
	}
}

// TestSplitStock: the shares sum to the total and differ by at most one unit.
func TestSplitStock(t *testing.T) {
	for _, c := range []struct {
		total int64
		k     int
		want  []int64
	}{{2000, 3, []int64{667, 667, 666}}, {2, 3, []int64{1, 1, 0}}, {0, 2, []int64{0, 0}}, {5, 1, []int64{5}}} {
		got := SplitStock(c.total, c.k)
		if len(got) != len(c.want) {
			t.Fatalf("SplitStock(%d, %d) = %v", c.total, c.k, got)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("SplitStock(%d, %d) = %v, want %v", c.total, c.k, got, c.want)
				break
			}
		}
	}
	l := Layout{SKU: "phone", Tags: []int{0, 3, 7}}
	if l.K() != 3 || l.Index(7) != 2 || l.Index(5) != -1 || l.Keys(1) != BucketKeys("phone", 3) || l.HomeIndex("alice") != Home("alice", 3) {
		t.Errorf("layout %+v: K %d, Index(7) %d, Index(5) %d", l, l.K(), l.Index(7), l.Index(5))
	}
}

// TestTagOfKey: every key of a sale or of a stock bucket gives back its tag; other keys none.
func TestTagOfKey(t *testing.T) {
	for _, tag := range []string{"phone", Tag("phone", 3), "a:b"} {
		for _, k := range KeysFor(tag).Named() {
			if got, ok := TagOfKey(k[1]); !ok || got != tag {
				t.Errorf("TagOfKey(%q) = %q, %v; want %q", k[1], got, ok, tag)
			}
		}
	}
	for _, k := range []string{"seckill:sales", "phone", "seckill:{phone", ""} {
		if got, ok := TagOfKey(k); ok {
			t.Errorf("TagOfKey(%q) = %q, want none", k, got)
		}
	}
}
