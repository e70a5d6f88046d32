package upstream

import (
	"bytes"
	"context"
	"strconv"
	"sync"

	"seckill-proxy/internal/resp"
)

// WAIT and WAITAOF with Redis's meaning. Redis answers them for the writes of the connection
// that asks: it waits until that many replicas acknowledged the replication offset of the
// connection's last write. Through the proxy, a client's writes went to several masters, on
// connections other clients share. So Wait asks each master that holds a slot the client
// wrote since its last WAIT (the router keeps them): on a connection of its own, it writes a
// probe key there and sends the client's command after it. The probe's offset is past every
// write that master took before it, the client's included (each was answered before the
// client's WAIT was read), so that master's answer counts the replicas holding them. The
// client gets the least count over those masters (WAITAOF: the least of each of its two).
// The client's own timeout bounds each wait, on a connection no one else waits behind.

// probeKeyPrefix names the key Wait writes: "seckill-proxy:wait:{<tag>}", with a tag of the
// slot asked for, set and deleted in one transaction (probeCommands), so that no client ever
// sees it: the writes go to the replicas all the same.
const probeKeyPrefix = "seckill-proxy:wait:{"

// slotTags holds, for each slot, a short hash tag of that slot.
var slotTags = sync.OnceValue(func() *[16384]string {
	var t [16384]string
	left := len(t)
	for i := 0; left > 0; i++ {
		tag := strconv.Itoa(i)
		if s := Slot([]byte(tag)); t[s] == "" {
			t[s] = tag
			left--
		}
	}
	return &t
})

// probeCommands write key and delete it again, as one transaction: a write that moves the
// master's replication offset and leaves no key.
func probeCommands(key []byte) [][][]byte {
	return [][][]byte{{[]byte("MULTI")}, {[]byte("SET"), key, []byte("1")}, {[]byte("DEL"), key}, {[]byte("EXEC")}}
}

// probeRefused is the error that stopped probeCommands' transaction (its replies, then the
// WAIT's), nil when EXEC ran both writes.
func probeRefused(r [][]byte) []byte {
	for _, reply := range r[:3] {
		if len(reply) > 0 && reply[0] == '-' {
			return reply
		}
	}
	// EXEC answers the two writes' replies; anything else (an aborted EXEC's nil, an error
	// inside) left the master's offset where it was.
	if exec := r[3]; !bytes.HasPrefix(exec, []byte("*2\r\n")) || bytes.Contains(exec, []byte("\r\n-")) {
		return exec
	}
	return nil
}

// probeKey is the key Wait writes in slot.
func probeKey(slot uint16) []byte {
	return []byte(probeKeyPrefix + slotTags()[slot] + "}")
}

// Wait answers args, a WAIT or WAITAOF, for a client that wrote to slots since its last WAIT
// (all: to slots beyond those named, or to keys that cannot be named); with neither, it asks
// every master.
func (c *Cluster) Wait(ctx context.Context, slots []uint16, all bool, args [][]byte) []byte {
	probes, err := c.waitProbes(ctx, slots, all)
	if err != nil {
		return unavailable(err)
	}
	ctx, cancel := c.blockContext(ctx, args)
	defer cancel()
	replies := make([][]byte, 0, len(probes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for addr, key := range probes {
		wg.Go(func() {
			var reply []byte
			r, err := c.node(addr).doOwn(ctx, &c.own, append(probeCommands(key), args))
			switch {
			case err != nil:
				reply = unavailable(err)
			case probeRefused(r) != nil:
				reply = bytes.Clone(probeRefused(r)) // the slot moved, an ACL: nothing to wait for
			default:
				reply = bytes.Clone(r[len(r)-1])
			}
			mu.Lock()
			replies = append(replies, reply)
			mu.Unlock()
		})
	}
	wg.Wait()
	return leastCounts(replies)
}

// waitProbes is the probe key for each master to ask: one of slots' on each master that holds
// one, or one on every master.
func (c *Cluster) waitProbes(ctx context.Context, slots []uint16, all bool) (map[string][]byte, error) {
	probes := map[string][]byte{}
	if all || len(slots) == 0 {
		ms, err := c.masters(ctx)
		if err != nil {
			return nil, err
		}
		for s := 0; s < 16384 && len(probes) < len(ms); s++ {
			key := probeKey(uint16(s))
			addr, err := c.masterAddr(ctx, key)
			if err != nil {
				return nil, err
			}
			if probes[addr] == nil {
				probes[addr] = key
			}
		}
		return probes, nil
	}
	for _, s := range slots {
		key := probeKey(s)
		addr, err := c.masterAddr(ctx, key)
		if err != nil {
			return nil, err
		}
		probes[addr] = key
	}
	return probes, nil
}

// leastCounts merges the masters' answers to one WAIT (integers) or WAITAOF (arrays of two
// integers): the least of each; the first error if any master answered one.
func leastCounts(replies [][]byte) []byte {
	var least []int64
	for _, r := range replies {
		if len(r) > 0 && r[0] == '-' {
			return r
		}
		counts, ok := countsOf(r)
		if !ok {
			return errorReply("ERR upstream WAIT reply " + strconv.Quote(string(r)))
		}
		if least == nil {
			least = counts
			continue
		}
		if len(counts) != len(least) {
			return errorReply("ERR upstream WAIT replies of different shapes")
		}
		for j := range least {
			least[j] = min(least[j], counts[j])
		}
	}
	if len(least) == 1 {
		return []byte(":" + strconv.FormatInt(least[0], 10) + "\r\n")
	}
	els := make([][]byte, len(least))
	for j, n := range least {
		els[j] = []byte(":" + strconv.FormatInt(n, 10) + "\r\n")
	}
	return arrayReply(els)
}

// countsOf reads an integer reply, or an array of integers.
func countsOf(r []byte) ([]int64, bool) {
	if n, err := resp.ParseInt(r); err == nil {
		return []int64{n}, true
	}
	els, err := resp.SplitArray(r)
	if err != nil || len(els) == 0 {
		return nil, false
	}
	out := make([]int64, len(els))
	for j, e := range els {
		n, err := resp.ParseInt(e)
		if err != nil {
			return nil, false
		}
		out[j] = n
	}
	return out, true
}
