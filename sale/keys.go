package sale

import "strings"

// Keys are the Redis keys of one SKU's sale. They all carry the hash tag {<sku>}, so they sit
// in one cluster slot and one Lua script may touch them all.
type Keys struct {
	// Stock is a string holding the remaining units.
	Stock string
	// Buyers is a hash uid -> order id.
	Buyers string
	// Meta is a hash: version, initial, start, end, limit, state.
	Meta string
	// Outbox is a stream of orders Kafka has not acknowledged yet.
	Outbox string
	// Result is a hash order id -> outcome, written by the sink.
	Result string
	// Outcomes is a stream the sink appends each batch's outcomes to (capped, about
	// OutcomesKept entries), each entry uid -> the outcome as STATUS says it ("confirmed
	// <id>", "rejected <id> <reason>", "cancelled <id>"): what wakes the buyers who wait for
	// theirs (SECKILL.STATUS ... WAIT) with one read per batch, not one per buyer.
	Outcomes string
	// SweepLease names the proxy that sweeps this SKU's outbox for now.
	SweepLease string
	// Dead is a stream of outbox entries that no one could read, moved aside by the sweeper.
	Dead string
	// LateLease names the proxy that looks for this SKU's late orders for now.
	LateLease string
	// Reserved is a sorted set of the order ids reserved here while a donor bucket is asked
	// for their units, scored by the reservation's time (ms); see docs/ARCHITECTURE.md.
	Reserved string
	// Donated is a hash order id -> "<home tag>:<uid>:<qty>" for the units this bucket gave
	// to another bucket's buyer, or "tomb" for an order id the sweeper closed to donations.
	Donated string
	// Fence is written and deleted again in one atomic step, never held: a write in the sale's
	// slot with no data, so that a WAIT after a read that wrote nothing covers what it read
	// (buy.lua, when a call sold nothing; the sold-out flag's reads).
	Fence string
}

// KeysFor returns the keys of sku's sale. sku must already be valid (see ValidID).
func KeysFor(sku string) Keys { return keysTagged(sku) }

// Key is one of the keys of tag's sale or bucket, by its name in Named ("stock", "outbox",
// ...), made alone: for a hot path that needs one key of many sales.
func Key(tag, name string) string { return SaleKeyPrefix + tag + "}:" + name }

// keysTagged are the keys of a sale, or of one of its buckets, under the hash tag {tag}.
func keysTagged(tag string) Keys {
	base := SaleKeyPrefix + tag + "}:"
	return Keys{
		Stock:      base + "stock",
		Buyers:     base + "buyers",
		Meta:       base + "meta",
		Outbox:     base + "outbox",
		Result:     base + "result",
		Outcomes:   base + "outcomes",
		SweepLease: base + "sweep",
		Dead:       base + "dead",
		LateLease:  base + "late",
		Reserved:   base + "reserved",
		Donated:    base + "donated",
		Fence:      base + "fence",
	}
}

// TagOfKey is the hash tag of a sale's key (a SKU, or a stock bucket's tag); ok false for a
// key that is not a sale's.
func TagOfKey(key string) (tag string, ok bool) {
	rest, ok := strings.CutPrefix(key, SaleKeyPrefix)
	if !ok {
		return "", false
	}
	i := strings.LastIndex(rest, "}:")
	if i < 0 {
		return "", false
	}
	return rest[:i], true
}

// Named is every key of the sale by its name (meta, stock, buyers, outbox, result, outcomes,
// sweep, dead, late, reserved, donated, fence), for tools that read or remove one.
func (k Keys) Named() [][2]string {
	return [][2]string{{"meta", k.Meta}, {"stock", k.Stock}, {"buyers", k.Buyers}, {"outbox", k.Outbox},
		{"result", k.Result}, {"outcomes", k.Outcomes}, {"sweep", k.SweepLease}, {"dead", k.Dead},
		{"late", k.LateLease}, {"reserved", k.Reserved}, {"donated", k.Donated}, {"fence", k.Fence}}
}

// OutcomesKept is about how many entries (sink batches, up to 500 outcomes each) a sale's
// outcome stream keeps: a reader further behind catches up from the result hash.
const OutcomesKept = 10000

// ScriptKeys is the key order that every script of a sale takes: meta, stock, buyers,
// outbox, result, reserved, donated.
func (k Keys) ScriptKeys() []string {
	return []string{k.Meta, k.Stock, k.Buyers, k.Outbox, k.Result, k.Reserved, k.Donated}
}
