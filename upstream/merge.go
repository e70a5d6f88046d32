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

	"seckill-proxy/internal/resp"
)

// Commands that read or reset a whole server, answered in front of a cluster as one server
// holding every master's data would answer them.

// keysStep is the COUNT of each SCAN of a KEYS walk: how much of its keyspace a master
// looks at in one step.
const keysStep = "1000"

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
	limit := c.opt.KeysMax
	var all [][]byte
	held := 0
	for _, m := range ms {
		from := len(all) // SCAN may name a key twice; keys of two masters differ
		cursor := []byte("0")
		for {
			r := c.one(ctx, m, [][]byte{[]byte("SCAN"), cursor, []byte("MATCH"), args[1], []byte("COUNT"), []byte(keysStep)})
			els, err := resp.SplitArray(r)
			if err != nil || len(els) != 2 {
				return r // UNAVAILABLE, or Redis's error
			}
			found, err := resp.SplitArray(els[1])
			if err != nil {
				return errorReply("ERR upstream SCAN reply")
			}
			for _, k := range found {
				held += len(k) + keyOverhead
			}
			all = append(all, found...)
			if limit > 0 && len(all) > limit {
				return errorReply(fmt.Sprintf("ERR KEYS %s matches more than %d keys (redis.keys_max); walk them with SCAN", clipArg(args[1]), limit))
			}
			if held > keysMaxBytes {
				return errorReply(fmt.Sprintf("ERR KEYS %s matches more than %d MiB of keys, the most seckill-proxy holds for one reply; walk them with SCAN", clipArg(args[1]), keysMaxBytes>>20))
			}
			if cursor = bulkValue(els[0]); string(cursor) == "0" || len(cursor) == 0 {
				break
			}
		}
		mine := all[from:] // sorted and compacted: no second copy of the keys to find the twice named
		slices.SortFunc(mine, bytes.Compare)
		all = all[:from+len(slices.CompactFunc(mine, bytes.Equal))]
	}
	return arrayReply(all)
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
