package sale

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Stock buckets: a hot sale's stock split over k buckets, each under a hash tag of its own so
// that the buckets can sit on different masters (docs/ARCHITECTURE.md, "Hot SKUs: stock
// buckets"). A bucket is named by its tag number: 0 is the sale's own tag {<sku>}, which a
// sale of one bucket has alone; any other t is {<sku>#<t>}. A SKU has no '#' (ValidID), so no
// bucket's tag is another sale's.

// MaxBuckets bounds a sale's buckets.
const MaxBuckets = 16

// MaxTag is the largest tag number (ParseBuckets takes at most 4 digits).
const MaxTag = 9999

// BucketKeys are the keys of the bucket of sku's sale with tag number t (0: KeysFor(sku)).
func BucketKeys(sku string, t int) Keys {
	if t == 0 {
		return KeysFor(sku)
	}
	return keysTagged(sku + "#" + strconv.Itoa(t))
}

// Home is the bucket, from 0 to k-1, where uid's duplicate check and order live in a sale
// of k buckets: FNV-1a of the uid, the same for every proxy, release and restart. k below 2
// is one bucket.
func Home(uid string, k int) int {
	if k < 2 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	return int(h.Sum32() % uint32(k))
}

// FormatBuckets is a sale's bucket tags as its meta keeps them: the tag numbers, in bucket
// order, comma-separated ("0,3,7").
func FormatBuckets(tags []int) string {
	parts := make([]string, len(tags))
	for i, t := range tags {
		parts[i] = strconv.Itoa(t)
	}
	return strings.Join(parts, ",")
}

// ParseBuckets reads FormatBuckets's form back: 1 to MaxBuckets distinct tag numbers, the
// first 0 (the sale's own tag), each at most 4 digits. An empty field is the one bucket of a
// sale warmed before buckets.
func ParseBuckets(s string) ([]int, error) {
	if s == "" {
		return []int{0}, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxBuckets {
		return nil, fmt.Errorf("buckets %q: more than %d", clipField(s), MaxBuckets)
	}
	tags := make([]int, len(parts))
	seen := make(map[int]bool, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || !digits(p) || len(p) > 4 || (len(p) > 1 && p[0] == '0') || seen[n] {
			return nil, fmt.Errorf("buckets %q: %q is not a new tag number", clipField(s), clipField(p))
		}
		seen[n] = true
		tags[i] = n
	}
	if tags[0] != 0 {
		return nil, errors.New("buckets " + strconv.Quote(clipField(s)) + ": the first bucket must be the sale's own tag, 0")
	}
	return tags, nil
}

// digits: s is one or more of 0-9 (no sign, no space).
func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func clipField(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Tag is the hash tag (without braces) of the bucket of sku's sale with tag number t: the
// sku itself for 0, else "<sku>#<t>". A bucket's keys are KeysFor(Tag(sku, t)).
func Tag(sku string, t int) string {
	if t == 0 {
		return sku
	}
	return sku + "#" + strconv.Itoa(t)
}

// SplitTag reads Tag's form back: the SKU and the tag number (0 for a tag with no '#', or
// one whose number is not one).
func SplitTag(tag string) (sku string, t int) {
	sku, num, ok := strings.Cut(tag, "#")
	if !ok {
		return tag, 0
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || !digits(num) {
		return sku, 0
	}
	return sku, n
}

// Layout is how a sale's stock is split: its SKU and its buckets' tag numbers, in bucket
// order, the first 0. A sale of one bucket has Tags {0}.
type Layout struct {
	SKU  string
	Tags []int
}

// OneBucket is the layout of a sale that is not split.
func OneBucket(sku string) Layout { return Layout{SKU: sku, Tags: []int{0}} }

// K is the number of buckets.
func (l Layout) K() int { return len(l.Tags) }

// Keys are the keys of the bucket at index i.
func (l Layout) Keys(i int) Keys { return BucketKeys(l.SKU, l.Tags[i]) }

// HomeIndex is the index of uid's home bucket.
func (l Layout) HomeIndex(uid string) int { return Home(uid, len(l.Tags)) }

// Index is the index of the bucket with tag number t, or -1.
func (l Layout) Index(t int) int {
	for i, x := range l.Tags {
		if x == t {
			return i
		}
	}
	return -1
}

// SplitStock splits total units over k buckets: as evenly as it goes, the first buckets
// taking one more unit each when k does not divide total.
func SplitStock(total int64, k int) []int64 {
	out := make([]int64, k)
	if k < 1 {
		return out
	}
	for i := range out {
		out[i] = total / int64(k)
		if int64(i) < total%int64(k) {
			out[i]++
		}
	}
	return out
}
