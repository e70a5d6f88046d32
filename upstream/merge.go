package upstream

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"seckill-proxy/internal/resp"
)

// Commands that read or reset a whole server, answered in front of a cluster as one server
// holding every master's data would answer them.

// keysStep is the COUNT of each SCAN of a KEYS walk: how much of its keyspace a master
// looks at in one step (5,000 keys: some 5 ms of its time with MATCH; SCAN costs a master
// about four times what KEYS does per key, whatever the COUNT). The masters are walked at
// once, each by a goroutine of its own: walked one after the other, a walk of 1.2 million
// keys over three masters took twice as long as Redis's own KEYS, past a client's timeout.
const keysStep = "5000"

// keysAtOnce bounds the KEYS walks of one proxy at once; keysWalks holds their places.
const keysAtOnce = 2

var keysWalks = make(chan struct{}, keysAtOnce)

// keysMaxBytes bounds what one KEYS walk holds (each key's bytes plus keyOverhead), so that
// the walks at once hold at most keysAtOnce x keysMaxBytes, and as much again while the reply
// is written, whatever keys_max says: a million keys of 100 bytes would be some 170 MiB a
// walk, and the sidecar's memory limit is 256 MiB.
const (
	keysMaxBytes = 16 << 20
	keyOverhead  = 40 // a slice header and the reply's framing
)

// maxKeysPattern bounds a KEYS pattern, which each SCAN step of the walk sends again and each
// master matches against every key it looks at.
const maxKeysPattern = 1024

// keys answers KEYS pattern as a walk of SCAN 0.. MATCH pattern over every master (or the
// one server), a step at a time, so that no master is held for its whole keyspace as KEYS
// would hold it; each key once. A key written or deleted during the walk may be named or
// not, as with SCAN; past keys_max keys, or keysMaxBytes held, the walk stops with an error
// rather than build a reply without bound.
func (c *Cluster) keys(ctx context.Context, args [][]byte) []byte {
	if len(args) != 2 {
		return errorReply("ERR wrong number of arguments for 'keys' command")
	}
	if len(args[1]) > maxKeysPattern {
		return errorReply(fmt.Sprintf("ERR KEYS pattern of %d bytes, over the %d seckill-proxy sends to every master on each step of its walk", len(args[1]), maxKeysPattern))
	}
	// At most keysAtOnce walks at a time, so that the replies held meanwhile stay within
	// keysAtOnce x keysMaxBytes, whatever the clients ask.
	select {
	case keysWalks <- struct{}{}:
		defer func() { <-keysWalks }()
	case <-ctx.Done():
		return unavailable(ctx.Err())
	}
	ms, err := c.masters(ctx)
	if err != nil {
		return unavailable(err)
	}
	w := keysWalk{c: c, pattern: args[1], limit: int64(c.opt.KeysMax)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make([][][]byte, len(ms))
	fails := make([][]byte, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			found[i], fails[i] = w.master(ctx, m)
			if fails[i] != nil {
				cancel() // the walk is over: the other masters need not go on
			}
		})
	}
	wg.Wait()
	if f := firstFail(fails, w.over.Load()); f != nil {
		return f
	}
	var all [][]byte
	for _, keys := range found {
		all = append(all, keys...)
	}
	return arrayReply(all)
}

// firstFail is the reply that ends a walk: with a bound passed, the bound's (the others'
// ended by it are not the cause); else the first master's failure.
func firstFail(fails [][]byte, over bool) []byte {
	for _, f := range fails {
		if f != nil && (!over || bytes.HasPrefix(f, []byte("-ERR KEYS"))) {
			return f
		}
	}
	return nil
}

// keysWalk is one KEYS walk's state, shared by its masters' goroutines.
type keysWalk struct {
	c          *Cluster
	pattern    []byte
	limit      int64 // keys_max (0: none)
	keys, held atomic.Int64
	over       atomic.Bool // a bound was passed: the first error says which
}

// master walks one master with SCAN: its keys, each once, or the reply that ends the walk
// (UNAVAILABLE, Redis's error, or a bound passed).
func (w *keysWalk) master(ctx context.Context, m string) ([][]byte, []byte) {
	var mine [][]byte
	cursor := []byte("0")
	for {
		r := w.c.one(ctx, m, [][]byte{[]byte("SCAN"), cursor, []byte("MATCH"), w.pattern, []byte("COUNT"), []byte(keysStep)})
		els, err := resp.SplitArray(r)
		if err != nil || len(els) != 2 {
			return nil, r // UNAVAILABLE, or Redis's error
		}
		found, err := resp.SplitArray(els[1])
		if err != nil {
			return nil, errorReply("ERR upstream SCAN reply")
		}
		held := 0
		for _, k := range found {
			held += len(k) + keyOverhead
		}
		mine = append(mine, found...)
		if n := w.keys.Add(int64(len(found))); w.limit > 0 && n > w.limit {
			w.over.Store(true)
			return nil, errorReply(fmt.Sprintf("ERR KEYS %s matches more than %d keys (redis.keys_max); walk them with SCAN", clipArg(w.pattern), w.limit))
		}
		if w.held.Add(int64(held)) > keysMaxBytes {
			w.over.Store(true)
			return nil, errorReply(fmt.Sprintf("ERR KEYS %s matches more than %d MiB of keys, the most seckill-proxy holds for one reply; walk them with SCAN", clipArg(w.pattern), keysMaxBytes>>20))
		}
		if cursor = bulkValue(els[0]); string(cursor) == "0" || len(cursor) == 0 {
			break
		}
	}
	slices.SortFunc(mine, bytes.Compare) // SCAN may name a key twice; keys of two masters differ
	return slices.CompactFunc(mine, bytes.Equal), nil
}

// clipArg is an argument for an error text: at most 64 bytes of it.
func clipArg(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

// randomKey answers RANDOMKEY from the masters in a random order: the first key one of them
// names, or nil when every master is empty.
func (c *Cluster) randomKey(ctx context.Context, args [][]byte) []byte {
	ms, err := c.masters(ctx)
	if err != nil {
		return unavailable(err)
	}
	var last []byte
	for _, i := range rand.Perm(len(ms)) {
		if last = c.one(ctx, ms[i], args); !isNull(last) {
			return last // a key, or Redis's error
		}
	}
	return last
}

func isNull(r []byte) bool { return string(r) == "$-1\r\n" || string(r) == "_\r\n" }

// slowlog answers SLOWLOG in front of a cluster: GET merges every master's entries, newest
// first (by the time each entry carries, then its id), and keeps as many as asked (10 by
// default, all for -1); LEN sums; RESET resets every master; anything else (HELP, a wrong
// subcommand) is the first master's answer.
func (c *Cluster) slowlog(ctx context.Context, args [][]byte) []byte {
	sub := ""
	if len(args) > 1 {
		sub = strings.ToLower(string(args[1]))
	}
	switch sub {
	case "len":
		return c.sumOverMasters(ctx, args)
	case "reset":
		return c.everyMaster(ctx, args)
	case "get":
	default:
		ms, err := c.masters(ctx)
		if err != nil {
			return unavailable(err)
		}
		return c.one(ctx, ms[0], args)
	}
	limit := int64(10)
	if len(args) > 2 {
		n, err := strconv.ParseInt(string(args[2]), 10, 64)
		if err != nil || n < -1 {
			return errorReply("ERR count should be greater than or equal to -1")
		}
		limit = n
	}
	if len(args) > 3 {
		return errorReply("ERR Unknown subcommand or wrong number of arguments for '" + string(args[1]) + "'. Try SLOWLOG HELP.")
	}
	_, replies, err := c.OnEveryMaster(ctx, args)
	if err != nil {
		return unavailable(err)
	}
	type entry struct {
		raw    []byte
		ts, id int64
	}
	var all []entry
	for _, r := range replies {
		els, err := resp.SplitArray(r)
		if err != nil {
			return r
		}
		for _, e := range els {
			fields, err := resp.SplitArray(e)
			if err != nil || len(fields) < 2 {
				return errorReply("ERR unexpected SLOWLOG entry from a master")
			}
			id, _ := resp.ParseInt(fields[0])
			ts, _ := resp.ParseInt(fields[1])
			all = append(all, entry{raw: e, ts: ts, id: id})
		}
	}
	slices.SortStableFunc(all, func(a, b entry) int {
		return cmp.Or(cmp.Compare(b.ts, a.ts), cmp.Compare(b.id, a.id))
	})
	if limit >= 0 && int64(len(all)) > limit {
		all = all[:limit]
	}
	out := make([][]byte, len(all))
	for i, e := range all {
		out[i] = e.raw
	}
	return arrayReply(out)
}

// latency answers LATENCY in front of a cluster: LATEST gives one entry per event, the newest
// of the masters' (its time and latest latency) with the highest maximum of them all; HISTORY
// merges the masters' samples of the event, oldest first; RESET resets every master and sums
// their counts; anything else (DOCTOR, GRAPH, HISTOGRAM, HELP) is the first master's answer.
func (c *Cluster) latency(ctx context.Context, args [][]byte) []byte {
	sub := ""
	if len(args) > 1 {
		sub = strings.ToLower(string(args[1]))
	}
	switch {
	case sub == "reset":
		return c.sumOverMasters(ctx, args)
	case sub == "histogram":
		return c.latencyHistogram(ctx, args)
	case sub == "latest" && len(args) == 2, sub == "history" && len(args) == 3:
	default:
		ms, err := c.masters(ctx)
		if err != nil {
			return unavailable(err)
		}
		return c.one(ctx, ms[0], args)
	}
	_, replies, err := c.OnEveryMaster(ctx, args)
	if err != nil {
		return unavailable(err)
	}
	all, bad := latencySamples(sub, replies)
	if bad != nil {
		return bad
	}
	if sub == "history" {
		return mergeLatencyHistory(all)
	}
	return mergeLatencyLatest(all)
}

// mergeLatencyHistory is LATENCY HISTORY over the masters: every sample, oldest first.
func mergeLatencyHistory(all []latencySample) []byte {
	slices.SortStableFunc(all, func(a, b latencySample) int { return cmp.Compare(a.ts, b.ts) })
	out := make([][]byte, len(all))
	for i, s := range all {
		out[i] = s.raw
	}
	return arrayReply(out)
}

// mergeLatencyLatest is LATENCY LATEST over the masters: per event, in the order events are
// first met, the newest sample's time and latest latency, with the highest maximum of all.
func mergeLatencyLatest(all []latencySample) []byte {
	var order []string
	byName := map[string]latencySample{}
	for _, s := range all {
		name := string(s.name)
		have, ok := byName[name]
		if !ok {
			order = append(order, name)
			byName[name] = s
			continue
		}
		top := max(have.max, s.max)
		if s.ts > have.ts {
			have = s
		}
		have.max = top
		byName[name] = have
	}
	out := make([][]byte, len(order))
	for i, name := range order {
		s := byName[name]
		out[i] = arrayReply([][]byte{bulk(s.name), integer(s.ts), integer(s.latest), integer(s.max)})
	}
	return arrayReply(out)
}

// latencySample is one entry of a master's LATENCY LATEST (an event's name, time, latest and
// highest latency) or LATENCY HISTORY (a time and a latency).
type latencySample struct {
	name            []byte
	ts, latest, max int64
	raw             []byte
}

// latencySamples reads the masters' replies to LATENCY sub; bad is the reply to give instead
// when one cannot be read.
func latencySamples(sub string, replies [][]byte) (all []latencySample, bad []byte) {
	for _, r := range replies {
		els, err := resp.SplitArray(r)
		if err != nil {
			return nil, r
		}
		for _, e := range els {
			f, err := resp.SplitArray(e)
			if err != nil || (sub == "latest" && len(f) < 4) || (sub == "history" && len(f) < 2) {
				return nil, errorReply("ERR unexpected LATENCY entry from a master")
			}
			s := latencySample{raw: e}
			if sub == "latest" {
				s.name = bulkBody(f[0])
				s.ts, _ = resp.ParseInt(f[1])
				s.latest, _ = resp.ParseInt(f[2])
				s.max, _ = resp.ParseInt(f[3])
			} else {
				s.ts, _ = resp.ParseInt(f[0])
			}
			all = append(all, s)
		}
	}
	return all, nil
}

// bulkBody is a bulk string reply's content ("" for anything else).
func bulkBody(raw []byte) []byte {
	i := bytes.Index(raw, []byte("\r\n"))
	if len(raw) == 0 || raw[0] != '$' || i < 0 || len(raw) < i+4 {
		return nil
	}
	return raw[i+2 : len(raw)-2]
}

func bulk(b []byte) []byte {
	return append(append([]byte("$"+strconv.Itoa(len(b))+"\r\n"), b...), "\r\n"...)
}

func integer(n int64) []byte { return []byte(":" + strconv.FormatInt(n, 10) + "\r\n") }
