package sale

import "bytes"

// KeyPrefix starts every key and channel that seckill-proxy owns.
const KeyPrefix = "seckill:"

// SaleKeyPrefix starts every key of a sale: seckill:{<sku>}:<part>. The hash tag puts all of
// one SKU's keys in one cluster slot.
const SaleKeyPrefix = KeyPrefix + "{"

// SalesKey is the set of sales whose outboxes the sweepers visit.
const SalesKey = KeyPrefix + "sales"

// DenyKey is the deny list, a sorted set uid -> expiry (ms; +inf for none), and
// DenyVersionKey the counter that every change of it bumps. Both are in one slot, under the
// sales' prefix so that no pass-through client may write them; "!" is in no SKU, so no sale's
// keys can meet them.
const (
	DenyKey        = SaleKeyPrefix + "!deny}:uids"
	DenyVersionKey = SaleKeyPrefix + "!deny}:version"
)

// EventsChannel is the pub/sub channel on which proxies hint to each other that a sale
// changed. A message is only a hint: a proxy re-reads the sale from Redis before it acts.
const EventsChannel = KeyPrefix + "events"

// OutcomeChannelPrefix starts a buyer's outcome channel, OutcomeChannel(sku, uid): a channel
// the proxy serves itself, never Redis (proxy's outcome channels), so no PUBLISH reaches its
// subscribers; the proxy refuses PUBLISH on it all the same.
const OutcomeChannelPrefix = KeyPrefix + "outcome:"

// OutcomeChannel is the channel on which uid's outcome in sku's sale is told:
// "seckill:outcome:<sku>/<uid>" ("/" is in no sku or uid, so the two parts cannot be confused).
func OutcomeChannel(sku, uid string) string { return OutcomeChannelPrefix + sku + "/" + uid }

// IsOutcomeChannel reports whether channel is in the outcome channels' namespace (well formed
// or not).
func IsOutcomeChannel(channel []byte) bool {
	return bytes.HasPrefix(channel, []byte(OutcomeChannelPrefix))
}

// ParseOutcomeChannel returns the sku and uid an outcome channel names; ok false for a channel
// outside the namespace or malformed.
func ParseOutcomeChannel(channel []byte) (sku, uid string, ok bool) {
	if !IsOutcomeChannel(channel) {
		return "", "", false
	}
	rest := channel[len(OutcomeChannelPrefix):]
	i := bytes.IndexByte(rest, '/')
	if i < 0 || !ValidID(rest[:i]) || !ValidID(rest[i+1:]) {
		return "", "", false
	}
	return string(rest[:i]), string(rest[i+1:]), true
}

// The seeds' keys of a sale (seckill:stock:<sku> next to seckill:buyers:<sku>): a legacy
// service still names them, and the proxy answers for them from the sale (router's legacy
// scripts). No client may write them: a number written into the seeds' stock key is how
// 2,053 phones were sold of 2,000.
const (
	LegacyStockPrefix   = KeyPrefix + "stock:"
	LegacySoldOutPrefix = KeyPrefix + "soldout:"
	LegacyBuyersPrefix  = KeyPrefix + "buyers:"
	LegacyUsersPrefix   = KeyPrefix + "users:"
)

// LegacyPrefixes are the seeds' key prefixes.
var LegacyPrefixes = []string{LegacyStockPrefix, LegacySoldOutPrefix, LegacyBuyersPrefix, LegacyUsersPrefix}

// Protected reports whether key belongs to the sales, the seeds' keys included: only
// seckill-proxy's own calls (the SECKILL commands and the sink) may write it. Reads are
// anyone's.
func Protected(key []byte) bool {
	if !bytes.HasPrefix(key, []byte(KeyPrefix)) {
		return false // nearly every key: one comparison
	}
	for _, l := range protectedKeys {
		if l.prefix && bytes.HasPrefix(key, []byte(l.s)) || !l.prefix && string(key) == l.s {
			return true
		}
	}
	return false
}

// ProtectedChannel reports whether channel is one only seckill-proxy may publish on.
func ProtectedChannel(channel []byte) bool { return string(channel) == EventsChannel }

// protectedKeys are the names Protected reads, and protectedChannels ProtectedChannel's, as
// literals: a prefix (every name that starts with it) or an exact name. The ACL rule is made
// from the same lists (PassthroughACL), so the proxy and Redis refuse the same keys.
var (
	protectedKeys = []literal{{SaleKeyPrefix, true}, {SalesKey, false},
		{LegacyStockPrefix, true}, {LegacySoldOutPrefix, true}, {LegacyBuyersPrefix, true}, {LegacyUsersPrefix, true}}
	protectedChannels = []literal{{EventsChannel, false}}
)
