package guard

import (
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestFlags(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	f := NewFlags(2 * time.Second)
	steps := []struct {
		do         func()
		at         time.Duration
		sku        string
		want, shut bool
	}{
		{nil, 0, "a", false, false},
		{func() { f.SetSoldOut("a", t0) }, 0, "a", true, false},
		{nil, 0, "b", false, false},
		{nil, 1999 * time.Millisecond, "a", true, false},
		{nil, 2 * time.Second, "a", false, false}, // lapsed: the next buy asks Redis again
		{func() { f.SetSoldOut("a", t0.Add(3*time.Second)) }, 4 * time.Second, "a", true, false},
		{func() { f.Clear("a") }, 4 * time.Second, "a", false, false},
		{func() { f.Clear("never-set") }, 0, "never-set", false, false},
		{func() { f.SetClosed("c", t0) }, time.Second, "c", true, true},
		{func() { f.SetSoldOut("c", t0) }, time.Second, "c", true, true}, // closed says more
		{nil, 3 * time.Second, "c", false, false},
		{func() { f.SetSoldOut("c", t0.Add(3*time.Second)) }, 3 * time.Second, "c", true, false}, // once it lapsed
	}
	for i, st := range steps {
		if st.do != nil {
			st.do()
		}
		got, closed := f.Get(st.sku, t0.Add(st.at))
		if got != st.want || closed != st.shut {
			t.Errorf("step %d: Get(%q, +%v) = %v, %v; want %v, %v", i, st.sku, st.at, got, closed, st.want, st.shut)
		}
	}
}

// BenchmarkSoldOutCheck is the sold-out path's in-process check: it must not allocate.
func BenchmarkSoldOutCheck(b *testing.B) {
	f := NewFlags(time.Minute)
	now := time.Now()
	f.SetSoldOut("sku_1001", now)
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := f.Get("sku_1001", now); !ok {
			b.Fatal("not flagged")
		}
	}
}

// TestApplySkipsOwnEvents: a proxy's own event coming back over pub/sub changes nothing (it
// acted when it sent it), so its late "soldout" cannot undo a release that followed; another
// proxy's events, and ones in the old two-field form, still apply.
func TestApplySkipsOwnEvents(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	g := &Guard{opt: Options{Instance: "me"}, flags: NewFlags(time.Hour), log: zap.NewNop()}
	g.apply("soldout sku1 me", now)
	if flagged, _ := g.flags.Get("sku1", now); flagged {
		t.Error("own soldout event set the flag")
	}
	g.apply("soldout sku1 other", now)
	if flagged, _ := g.flags.Get("sku1", now); !flagged {
		t.Error("another proxy's soldout event did not set the flag")
	}
	g.apply("release sku1 me", now)
	if flagged, _ := g.flags.Get("sku1", now); !flagged {
		t.Error("own release event cleared the flag")
	}
	g.apply("release sku1", now)
	if flagged, _ := g.flags.Get("sku1", now); flagged {
		t.Error("a release in the old form did not clear the flag")
	}
}
