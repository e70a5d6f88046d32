package upstream

import (
	"testing"
)

// latest is a master's LATENCY LATEST entry: event, time, latest, max.
func latest(event string, ts, last, most int64) string {
	return "*4\r\n" + string(bulk([]byte(event))) + string(integer(ts)) + string(integer(last)) + string(integer(most))
}

// TestMergeLatencyLatest: one entry per event, in the order events are first met, with the
// newest sample's time and latency and the highest maximum of every master.
func TestMergeLatencyLatest(t *testing.T) {
	m1 := "*2\r\n" + latest("command", 100, 5, 9) + latest("fork", 50, 2, 2)
	m2 := "*1\r\n" + latest("command", 200, 3, 4)
	all, bad := latencySamples("latest", [][]byte{[]byte(m1), []byte(m2)})
	if bad != nil {
		t.Fatalf("refused: %q", bad)
	}
	got := string(mergeLatencyLatest(all))
	want := "*2\r\n" + latest("command", 200, 3, 9) + latest("fork", 50, 2, 2)
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestMergeLatencyHistory: every master's samples, oldest first.
func TestMergeLatencyHistory(t *testing.T) {
	sample := func(ts, ms int64) string { return "*2\r\n" + string(integer(ts)) + string(integer(ms)) }
	m1 := "*2\r\n" + sample(10, 1) + sample(30, 3)
	m2 := "*1\r\n" + sample(20, 2)
	all, bad := latencySamples("history", [][]byte{[]byte(m1), []byte(m2)})
	if bad != nil {
		t.Fatalf("refused: %q", bad)
	}
	if got, want := string(mergeLatencyHistory(all)), "*3\r\n"+sample(10, 1)+sample(20, 2)+sample(30, 3); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestLatencySamplesMalformed: a master's error is given as it is; an entry too short is an
// error of the proxy's.
func TestLatencySamplesMalformed(t *testing.T) {
	if _, bad := latencySamples("latest", [][]byte{[]byte("-ERR nope\r\n")}); string(bad) != "-ERR nope\r\n" {
		t.Errorf("a master's error: %q", bad)
	}
	if _, bad := latencySamples("latest", [][]byte{[]byte("*1\r\n*2\r\n:1\r\n:2\r\n")}); string(bad) != "-ERR unexpected LATENCY entry from a master\r\n" {
		t.Errorf("a short entry: %q", bad)
	}
}
