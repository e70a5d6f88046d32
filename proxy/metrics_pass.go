package proxy

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// passMetrics count the pass-through commands by name, their errors and their latency, and
// what the proxy's own connections to Redis go through: connects, redirects, and the
// commands answered UNAVAILABLE, by reason. A command's counters are found by its name in a
// map that is copied on the rare insert, so that the hot path takes no lock; the names are
// bounded (maxPassNames, then "other"), since a client chooses them.
type passMetrics struct {
	names  atomic.Pointer[map[string]*passStat]
	mu     sync.Mutex     // serialises inserts into names
	lats   []*passLatency // one per event loop, and shared for the rest; guarded by mu
	shared *passLatency

	connects    prometheus.Counter
	redirects   *prometheus.CounterVec
	moved, ask  prometheus.Counter
	unavailable *prometheus.CounterVec
}

// passStat is one command's counters.
type passStat struct{ calls, errors atomic.Int64 }

// maxPassNames bounds the command names with series of their own.
const maxPassNames = 256

// The reasons a command is answered UNAVAILABLE.
const (
	unavailConnect  = "connect"   // the connection to the node could not be opened
	unavailTimeout  = "timeout"   // no reply within redis.command_timeout
	unavailLost     = "lost"      // the connection broke with the command in flight
	unavailNoAnswer = "no_answer" // the node answered nothing for two timeouts
	unavailProtocol = "protocol"  // the node's reply could not be read
	unavailOffLoop  = "off_loop"  // a command served off the event loop (transactions, blocking commands, event_loops: 0)
)

var passDesc = struct{ calls, errors, latency *prometheus.Desc }{
	latency: prometheus.NewDesc("seckill_proxy_passthrough_duration_seconds", "Time from sending a pass-through command to Redis to its reply (on an event loop, at its turns).", nil, nil),
	calls:   prometheus.NewDesc("seckill_proxy_passthrough_commands_total", "Pass-through commands answered, by command (lower-case; \"other\" past 256 names).", []string{"command"}, nil),
	errors:  prometheus.NewDesc("seckill_proxy_passthrough_errors_total", "Pass-through commands answered with an error reply (Redis's or the proxy's), by command.", []string{"command"}, nil),
}

func newPassMetrics(reg *prometheus.Registry) *passMetrics {
	p := &passMetrics{
		connects: prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_proxy_upstream_connects_total",
			Help: "Connections the event loops opened to Redis nodes (a count that grows after the first ones means reconnects)."}),
		redirects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_proxy_upstream_redirects_total",
			Help: "MOVED and ASK replies the proxy followed for its clients."}, []string{"kind"}),
		unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_proxy_upstream_unavailable_total",
			Help: "Pass-through commands answered UNAVAILABLE, by reason."}, []string{"reason"}),
	}
	p.moved, p.ask = p.redirects.WithLabelValues("moved"), p.redirects.WithLabelValues("ask")
	for _, r := range []string{unavailConnect, unavailTimeout, unavailLost, unavailNoAnswer, unavailProtocol, unavailOffLoop} {
		p.unavailable.WithLabelValues(r)
	}
	empty := map[string]*passStat{}
	p.names.Store(&empty)
	p.shared = p.newLatency()
	reg.MustRegister(p.connects, p.redirects, p.unavailable, passCollector{p})
	return p
}

// passBuckets are the pass-through latency histogram's upper bounds, in seconds.
var passBuckets = [...]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// passBounds are passBuckets as durations.
var passBounds = func() (out [len(passBuckets)]time.Duration) {
	for i, b := range passBuckets {
		out[i] = time.Duration(b * float64(time.Second))
	}
	return out
}()

// passLatency counts latencies by bucket with plain atomic adds: an event loop has one of its
// own, so that its adds meet no other core's, and the collector sums them at scrape.
type passLatency struct {
	counts [len(passBuckets) + 1]atomic.Uint64 // the last: above every bound
	sum    atomic.Int64                        // nanoseconds
}

func (l *passLatency) observe(d time.Duration) {
	i := 0
	for i < len(passBounds) && d > passBounds[i] {
		i++
	}
	l.counts[i].Add(1)
	l.sum.Add(int64(d))
}

// newLatency is a latency count of its own, for one event loop.
func (p *passMetrics) newLatency() *passLatency {
	l := &passLatency{}
	p.mu.Lock()
	p.lats = append(p.lats, l)
	p.mu.Unlock()
	return l
}

// stat is the counters of the command named name (any case).
func (p *passMetrics) stat(name []byte) *passStat {
	var buf [32]byte
	key := commandKey(buf[:0], name)
	if s, ok := (*p.names.Load())[string(key)]; ok {
		return s
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := *p.names.Load()
	if s, ok := old[string(key)]; ok {
		return s
	}
	if len(old) >= maxPassNames {
		key = []byte("other")
		if s, ok := old["other"]; ok {
			return s
		}
	}
	next := make(map[string]*passStat, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	s := &passStat{}
	next[string(key)] = s
	p.names.Store(&next)
	return s
}

// commandKey appends name in lower case to dst, or "other" if it is longer than 32 bytes or
// has a byte no command name has.
func commandKey(dst, name []byte) []byte {
	start := len(dst)
	if len(name) > 32 {
		return append(dst, "other"...)
	}
	for _, c := range name {
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '_', c == '-', c == '|':
		default:
			return append(dst[:start], "other"...)
		}
		dst = append(dst, c)
	}
	return dst
}

// done counts one command answered with reply, d after it was sent, in s and l.
func (s *passStat) done(l *passLatency, reply []byte, d time.Duration) {
	s.calls.Add(1)
	if len(reply) > 0 && reply[0] == '-' {
		s.errors.Add(1)
	}
	l.observe(d)
}

// offLoop counts a pass-through command served off the event loop (through the router, on
// the upstream package's connections): every command of a batch took d.
func (p *passMetrics) offLoop(args [][]byte, reply []byte, d time.Duration) {
	if len(args) == 0 {
		return
	}
	p.stat(args[0]).done(p.shared, reply, d)
	if bytes.HasPrefix(reply, []byte("-UNAVAILABLE")) {
		p.unavailable.WithLabelValues(unavailOffLoop).Inc()
	}
}

// redirect counts a MOVED or ASK reply followed.
func (p *passMetrics) redirect(reply []byte) {
	if bytes.HasPrefix(reply, []byte("-ASK ")) {
		p.ask.Inc()
	} else {
		p.moved.Inc()
	}
}

type passCollector struct{ p *passMetrics }

func (c passCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- passDesc.calls
	ch <- passDesc.errors
	ch <- passDesc.latency
}

func (c passCollector) Collect(ch chan<- prometheus.Metric) {
	for name, s := range *c.p.names.Load() {
		ch <- prometheus.MustNewConstMetric(passDesc.calls, prometheus.CounterValue, float64(s.calls.Load()), name)
		ch <- prometheus.MustNewConstMetric(passDesc.errors, prometheus.CounterValue, float64(s.errors.Load()), name)
	}
	var counts [len(passBuckets) + 1]uint64
	var sum int64
	c.p.mu.Lock()
	for _, l := range c.p.lats {
		for i := range counts {
			counts[i] += l.counts[i].Load()
		}
		sum += l.sum.Load()
	}
	c.p.mu.Unlock()
	buckets := make(map[float64]uint64, len(passBuckets))
	var cum uint64
	for i, b := range passBuckets {
		cum += counts[i]
		buckets[b] = cum
	}
	ch <- prometheus.MustNewConstHistogram(passDesc.latency, cum+counts[len(passBuckets)], time.Duration(sum).Seconds(), buckets)
}
