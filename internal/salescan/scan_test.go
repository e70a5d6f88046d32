package salescan

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/internal/testenv"
	"seckill-proxy/sale"
)

// TestScan: one scan reads every figure of a sale with pending orders, of a closed split sale's
// second bucket with a reservation, and of a tag with no sale, among more tags than a call
// takes, spread over every master, in the order asked.
func TestScan(t *testing.T) {
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.Redis(t), ClusterStateReloadInterval: time.Second})
	t.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	open, split := "scan_open_"+run, "scan_split_"+run
	bucket := sale.Tag(split, 3)
	ko, kb := sale.KeysFor(open), sale.KeysFor(bucket)
	t.Cleanup(func() {
		for _, k := range []sale.Keys{ko, kb} {
			rc.Del(context.Background(), k.Meta, k.Outbox, k.Buyers, k.Result, k.Reserved)
		}
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(rc.HSet(ctx, ko.Meta, "state", "open", "end", "0", "route", "topic=t schema=2").Err())
	first, err := rc.XAdd(ctx, &redis.XAddArgs{Stream: ko.Outbox, Values: []string{"order", "a"}}).Result()
	must(err)
	must(rc.XAdd(ctx, &redis.XAddArgs{Stream: ko.Outbox, Values: []string{"order", "b"}}).Err())
	must(rc.HSet(ctx, ko.Buyers, "u1", "id1:1", "u2", "id2:1").Err())
	must(rc.HSet(ctx, ko.Result, "id1", "confirmed").Err())
	must(rc.HSet(ctx, kb.Meta, "state", "closed", "end", "12345", "buckets", "0,3").Err())
	must(rc.ZAdd(ctx, kb.Reserved, redis.Z{Score: 1, Member: "id9"}).Err())

	tags := []string{}
	for i := range 2*Chunk + 100 {
		tags = append(tags, fmt.Sprintf("scan_none_%s_%d", run, i))
	}
	tags[7], tags[Chunk+3] = open, bucket
	got := Scan(ctx, rc, ForSweep, tags)
	if len(got) != len(tags) {
		t.Fatalf("%d buckets for %d tags", len(got), len(tags))
	}
	late := Scan(ctx, rc, ForLate, tags)
	msPart, _, _ := strings.Cut(first, "-")
	ms, _ := strconv.ParseInt(msPart, 10, 64)
	want := map[int]Bucket{
		7:         {Tag: open, Outbox: 2, OldestMs: ms, State: "open", End: "0", Route: "topic=t schema=2"},
		Chunk + 3: {Tag: bucket, State: "closed", End: "12345", Buckets: "0,3", Reserved: 1},
	}
	if w := (Bucket{Tag: open, State: "open", End: "0", Route: "topic=t schema=2", Buyers: 2, Results: 1}); late[7] != w {
		t.Errorf("for the late watch: %+v, want %+v", late[7], w)
	}
	for i, b := range got {
		w, ok := want[i]
		if !ok {
			w = Bucket{Tag: tags[i]}
		}
		if b != w {
			t.Errorf("bucket %d: %+v, want %+v", i, b, w)
		}
	}
	if got[7].HasMeta() != true || got[0].HasMeta() {
		t.Errorf("HasMeta: %v for the sale, %v for no sale", got[7].HasMeta(), got[0].HasMeta())
	}
	if l, err := Layout(got[Chunk+3]); err != nil || len(l.Tags) != 2 || l.Tags[1] != 3 {
		t.Errorf("Layout: %+v, %v", l, err)
	}
}

// TestScanPastABrokenBucket: a bucket whose keys have the wrong type (an operator's mistake,
// a client's) gets its own error, and the buckets read with it in the same call are read.
func TestScanPastABrokenBucket(t *testing.T) {
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.Redis(t), ClusterStateReloadInterval: time.Second})
	t.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	// One hash tag for both, so that they are in one call.
	broken, good := "scanbroken_"+run, "scanbroken_"+run+"}x{scanbroken_"+run
	kb := sale.KeysFor(broken)
	t.Cleanup(func() { rc.Del(context.Background(), kb.Outbox, kb.Meta) })
	if err := rc.Set(ctx, kb.Outbox, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.HSet(ctx, kb.Meta, "state", "open").Err(); err != nil {
		t.Fatal(err)
	}
	got := Scan(ctx, rc, ForSweep, []string{broken, good, broken})
	if got[0].Err == nil || !strings.Contains(got[0].Err.Error(), "WRONGTYPE") || got[2].Err == nil {
		t.Errorf("the broken bucket: %+v, %+v; want WRONGTYPE", got[0], got[2])
	}
	if got[1] != (Bucket{Tag: good}) {
		t.Errorf("the bucket read with it: %+v, want read (no sale)", got[1])
	}
}

// TestLead: one instance holds a lease at a time; the holder renews it; another takes it once
// it lapses, or at once once the holder gives it up.
func TestLead(t *testing.T) {
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.Redis(t), ClusterStateReloadInterval: time.Second})
	t.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	key := SweepLeadKey("test-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	t.Cleanup(func() { rc.Del(context.Background(), key) })
	lead := func(who string, ttl time.Duration) bool {
		t.Helper()
		ok, err := Lead(ctx, rc, key, who, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !lead("a", 200*time.Millisecond) || lead("b", time.Second) || !lead("a", 200*time.Millisecond) {
		t.Fatal("a takes the lease, b is refused, a renews it")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !lead("b", time.Minute) { // a stops renewing
		if time.Now().After(deadline) {
			t.Fatal("b never took the lapsed lease")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := Unlead(ctx, rc, key, "a"); err != nil || lead("a", time.Second) {
		t.Fatalf("a gave up a lease it did not hold (%v), and took b's", err)
	}
	if err := Unlead(ctx, rc, key, "b"); err != nil || !lead("a", time.Second) {
		t.Fatalf("b gave up its lease (%v): a takes it at once", err)
	}
}
