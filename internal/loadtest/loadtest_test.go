package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// good is the state of a sale that went right: 2,000 units, all sold, all stored.
func good() State {
	return State{Units: 2000, MySQLStock: 0, Confirmed: 2000, ConfirmedUnits: 2000, RedisStock: 0, RedisBuyers: 2000, Successes: 2000, Qty: 1, Stored: 2000, RedisOutcomes: 2000}
}

func TestEvaluatePassesAGoodSale(t *testing.T) {
	for _, c := range Evaluate(good()) {
		if !c.OK {
			t.Errorf("%s failed on a good sale: %s", c.Name, c.Detail)
		}
	}
}

// TestEachCheckCanFail breaks the state one way at a time; the named check must fail.
func TestEachCheckCanFail(t *testing.T) {
	tests := []struct {
		check  string
		break_ func(s *State)
	}{
		{"I1 no oversell", func(s *State) { s.ConfirmedUnits, s.Confirmed, s.Successes, s.MySQLStock = 2053, 2053, 2053, -53 }},
		{"I1 no oversell", func(s *State) { s.RedisStock = -1 }},
		{"successes = confirmed orders = units sold", func(s *State) { s.Successes = 2001 }},
		{"successes = confirmed orders = units sold", func(s *State) { s.MySQLStock = 1 }},
		{"I2 every order handed out is in MySQL", func(s *State) { s.MissingOrders = []string{"dc6f2p1ksdu8am6vpjd0"} }},
		{"I3 no duplicate buyer", func(s *State) { s.DupBuyers = 1 }},
		{"no rejected order", func(s *State) { s.Rejected = 53 }},
		{"I5 Redis stock = MySQL stock", func(s *State) { s.RedisStock = 50 }},
		{"I5 Redis buyers = MySQL confirmed", func(s *State) { s.RedisBuyers = 2053 }},
		{"outbox drained", func(s *State) { s.Outbox = 3 }},
		{"every stored order's outcome in Redis", func(s *State) { s.RedisOutcomes = 1488 }},
	}
	for _, tt := range tests {
		s := good()
		tt.break_(&s)
		found := false
		for _, c := range Evaluate(s) {
			if c.Name == tt.check {
				found = true
				if c.OK {
					t.Errorf("%s passed on a broken state %+v", tt.check, s)
				}
			}
		}
		if !found {
			t.Errorf("no check named %q", tt.check)
		}
	}
}

func TestReportArithmetic(t *testing.T) {
	h := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	for v := int64(1); v <= 1000; v++ {
		_ = h.RecordValue(v) // 1..1000 µs
	}
	r := Result{Requests: 1000, Elapsed: 500 * time.Millisecond, Latency: h, Replies: map[string]int64{ReplyOrder: 10, ReplySoldOut: 990}}
	rep := NewReport(ModeProxy, "sku", 10, Load{Conns: 4, Pipeline: 2}, r)
	if rep.Throughput != 2000 {
		t.Errorf("throughput %v, want 2000", rep.Throughput)
	}
	if rep.Latency.P50 != 500 || rep.Latency.P90 != 900 || rep.Latency.P99 != 990 || rep.Latency.Max != 1000 || rep.Latency.P999 != 999 {
		t.Errorf("percentiles %+v", rep.Latency)
	}
	if !rep.Passed {
		t.Error("a run with requests and no checks did not pass")
	}
	rep.AddChecks([]Check{{Name: "a", OK: true}, {Name: "b", OK: false, Detail: "broken"}}, 1500*time.Microsecond)
	if rep.Passed || rep.DrainMs != 1.5 {
		t.Errorf("after a failed check: passed %v, drain %v", rep.Passed, rep.DrainMs)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2000 requests/s", "p50 500µs", "FAIL  b", "PASS  a", "SOLDOUT 990, order 10", "FAILED"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	b, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(b), `"p99_9":999`) || !strings.Contains(string(b), `"passed":false`) {
		t.Errorf("json %s, %v", b, err)
	}
	if NewReport(ModeProxy, "sku", 1, Load{}, Result{}).Throughput != 0 {
		t.Error("an empty run has a throughput")
	}
}

func TestKind(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ReplyOrder},
		{errors.New("SOLDOUT sku"), ReplySoldOut},
		{errors.New("DUPLICATE abc"), ReplyDuplicate},
		{errors.New("CLOSED ended"), ReplyClosed},
		{errors.New("UNAVAILABLE redis"), ReplyUnavailable},
		{errors.New("LIMITED rate 3"), ReplyLimited},
		{errors.New("BUSY 2048 buys of s are waiting"), ReplyBusy},
		{errors.New("ERR bad"), ReplyOther},
		{errors.New("i/o timeout"), ReplyOther},
	}
	for _, tt := range tests {
		if got := Kind(tt.err); got != tt.want {
			t.Errorf("Kind(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestRepeatShare(t *testing.T) {
	l := Load{Buyers: 10000, RepeatShare: 0.1}
	uids := map[string]bool{}
	for i := range l.Buyers {
		uids[l.uid(i)] = true
	}
	if got := len(uids); got != 9100 {
		t.Fatalf("%d distinct buyers out of 10000 with a repeat share of 0.1, want 9100", got)
	}
	if err := (Load{Buyers: 1, Conns: 1, Pipeline: 1, Qty: 1, RepeatShare: 1}).Validate(); err == nil {
		t.Fatal("a repeat share of 1 was accepted")
	}
}

// TestRun drives an in-process buyer: every request is answered and counted once.
func TestRun(t *testing.T) {
	stock := make(chan struct{}, 5)
	for range 5 {
		stock <- struct{}{}
	}
	buy := func(_ context.Context, uid string) (string, error) {
		select {
		case <-stock:
			return "order-" + uid, nil
		default:
			return "", errors.New("SOLDOUT sku")
		}
	}
	var progressed atomic.Int64
	r := Run(context.Background(), Load{Buyers: 100, Conns: 4, Pipeline: 3, Qty: 1}, buy, nil, func(n int) { progressed.Add(int64(n)) }, nil)
	if r.Requests != 100 || progressed.Load() != 100 || r.Replies[ReplyOrder] != 5 || r.Replies[ReplySoldOut] != 95 || len(r.Orders) != 5 {
		t.Fatalf("requests %d, progress %d, replies %v, orders %d", r.Requests, progressed.Load(), r.Replies, len(r.Orders))
	}
	var svg bytes.Buffer
	if err := WriteChart(&svg, "t", r, 10, 1); err != nil || !strings.HasPrefix(svg.String(), "<svg") || !strings.Contains(svg.String(), "polyline") {
		t.Fatalf("chart: %v\n%s", err, svg.String())
	}
	for _, want := range []string{`class="xtick"`, " s</text>", " ms</text>", "/s</text>", ">LIMITED</text>", ">UNAVAILABLE</text>", ">order</text>",
		"stock left (of 10 units)", ">10</text>", ">5</text>"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("the chart lacks %q (axes, ticks, a legend of every reply kind)", want)
		}
	}
}

// TestEvaluateUnderFaults: what a fault may cost (a lost reply, an order MySQL rejected that
// no buyer was told of, a buyer told UNAVAILABLE whose order stands) passes; each invariant
// broken fails its check, buyer by buyer: an order told and then rejected fails unless the
// fault wrote Redis behind the proxy (rejectedOK).
func TestEvaluateUnderFaults(t *testing.T) {
	faulty := good()
	faulty.Successes = 1990                        // ten replies lost to a killed proxy
	faulty.Rejected, faulty.RedisBuyers = 50, 2050 // an order rejected that no buyer was told of
	faulty.Stored, faulty.RedisOutcomes = 2050, 2050
	faulty.NotKnownConfirmed, faulty.SoldOutTold = 12, 2000
	for _, c := range EvaluateUnderFaults(faulty, false) {
		if !c.OK {
			t.Errorf("%s failed on what a fault may cost: %s", c.Name, c.Detail)
		}
	}
	operator := good()
	operator.ToldNotConfirmed = []string{"x"} // an operator's SET of 50 more units on Redis
	for _, c := range EvaluateUnderFaults(operator, true) {
		if !c.OK {
			t.Errorf("%s failed with rejectedOK: %s", c.Name, c.Detail)
		}
	}
	for check, break_ := range map[string]func(s *State){
		"I1 no oversell":                         func(s *State) { s.ConfirmedUnits, s.MySQLStock = 2053, -53 },
		"I2 every order handed out is in MySQL":  func(s *State) { s.MissingOrders = []string{"x"} },
		"I9 every order handed out is confirmed": func(s *State) { s.ToldNotConfirmed = []string{"x"} },
		"I3 no duplicate buyer":                  func(s *State) { s.DupBuyers = 1 },
		"every unit sold in Redis reached MySQL": func(s *State) { s.RedisBuyers = 2001 },
		"no false sold-out":                      func(s *State) { s.SoldOutTold, s.MySQLStock, s.ConfirmedUnits = 1, 3, 1997 },
		"outbox drained":                         func(s *State) { s.Outbox = 1 },
		"every stored order's outcome in Redis":  func(s *State) { s.RedisOutcomes = 1488 },
	} {
		s := good()
		break_(&s)
		for _, c := range EvaluateUnderFaults(s, false) {
			if c.Name == check && c.OK {
				t.Errorf("%s passed on a broken state %+v", check, s)
			}
		}
	}
}

// The error window spans the samples with an error reply.
func TestErrorWindow(t *testing.T) {
	r := Result{Requests: 1, Replies: map[string]int64{ReplyOrder: 1}, Timeline: []Sample{
		{Replies: map[string]int64{ReplyOrder: 5}}, {Replies: map[string]int64{ReplyUnavailable: 1}},
		{Replies: map[string]int64{ReplySoldOut: 5}}, {Replies: map[string]int64{ReplyOther: 2}}, {Replies: map[string]int64{ReplySoldOut: 1}}}}
	if got := NewReport(ModeProxy, "s", 1, Load{Conns: 1, Pipeline: 1}, r).ErrorWindowMs; got != 300 {
		t.Errorf("error window %v ms, want 300 (samples 2 to 4 of 100 ms)", got)
	}
}
