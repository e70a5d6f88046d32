package guard

import (
	"math"
	"strconv"
	"testing"

	"seckill-proxy/sale"
)

// TestStatusOf: status.lua's reply read as SECKILL.STATUS answers it, for each standing, and
// for the i-th buyer of a batched reply.
func TestStatusOf(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    []any
		i    int
		want string
	}{
		{"no order", []any{"0", "", "", ""}, 0, "none"},
		{"an empty reply", nil, 0, "none"},
		{"pending", []any{"0", "o1", "", "0"}, 0, "pending o1"},
		{"confirmed", []any{"0", "o1", "confirmed", "0"}, 0, "confirmed o1"},
		{"rejected, with its reason", []any{"0", "o1", "rejected no_stock", "0"}, 0, "rejected o1 no_stock"},
		{"rejected, with a reason of words", []any{"0", "o1", "rejected db down", "0"}, 0, "rejected o1 db down"},
		{"cancelled", []any{"0", "o1", "confirmed", "1"}, 0, "cancelled o1"},
		{"cancelled while pending", []any{"0", "o1", "", int64(1)}, 0, "cancelled o1"},
		{"second buyer", []any{"0", "o1", "confirmed", "0", "o2", "", "0"}, 1, "pending o2"},
		{"second buyer, none", []any{"0", "o1", "confirmed", "0", "", "", ""}, 1, "none"},
		{"past the reply's end", []any{"0", "o1", "confirmed", "0"}, 3, "none"},
		{"a value of another type", []any{"0", 3.5, "", ""}, 0, "none"},
	} {
		if got := statusOf(tt.v, tt.i).String(); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestStatusHome: a buyer asked at the wrong bucket (a proxy that missed a re-warm into
// another layout) is asked again at the home the sale's meta names; a reply naming no
// buckets, or unreadable ones, keeps the bucket asked.
func TestStatusHome(t *testing.T) {
	one := sale.Layout{SKU: "s", Tags: []int{0}}.Keys(0)
	four := sale.Layout{SKU: "s", Tags: []int{0, 1, 2, 3}}
	var uid string
	for n := 0; ; n++ { // a buyer whose home of four buckets is not the sale's own
		uid = "u" + strconv.Itoa(n)
		if four.HomeIndex(uid) != 0 {
			break
		}
	}
	home, moved := statusHome("s", uid, one, []any{"0,1,2,3", "", "", ""})
	if !moved || home != four.Keys(four.HomeIndex(uid)) {
		t.Fatalf("asked at the one bucket, the sale has four: moved %v to %v", moved, home)
	}
	if _, moved := statusHome("s", uid, home, []any{"0,1,2,3"}); moved {
		t.Fatal("asked at the home: moved again")
	}
	for _, field := range []any{"", "1,2", "0,0", "0,x", nil} {
		if got, moved := statusHome("s", uid, one, []any{field}); moved || got != one {
			t.Errorf("buckets %v: moved %v to %v", field, moved, got)
		}
	}
}

// TestMetaInt: a sale's meta fields read as integers; the rate's bucket keeps a fraction,
// which is cut; a missing or broken field is 0, and one out of range the nearest int64 (1e30
// was read as a negative number).
func TestMetaInt(t *testing.T) {
	meta := map[string]string{"stock": "2000", "tokens": "12.75", "neg": "-3", "bad": "x", "huge": "1e30",
		"tiny": "-1e30", "inf": "1e400", "nan": "NaN"}
	for field, want := range map[string]int64{"stock": 2000, "tokens": 12, "neg": -3, "bad": 0, "missing": 0,
		"huge": math.MaxInt64, "tiny": math.MinInt64, "inf": math.MaxInt64, "nan": 0} {
		if got := metaInt(meta, field); got != want {
			t.Errorf("metaInt(%s) = %d, want %d", field, got, want)
		}
	}
}

// TestAddSaturating: buckets' fields summed stay at int64's bounds instead of wrapping.
func TestAddSaturating(t *testing.T) {
	for _, c := range [][3]int64{{1, 2, 3}, {-1, -2, -3}, {math.MaxInt64, 1, math.MaxInt64}, {math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64}, {math.MaxInt64, -1, math.MaxInt64 - 1}, {math.MinInt64, math.MaxInt64, -1}} {
		if got := addSaturating(c[0], c[1]); got != c[2] {
			t.Errorf("addSaturating(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}
