package guard

import (
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/sale"
)

// BuyRequest is one parsed SECKILL.BUY.
type BuyRequest struct {
	SKU string
	UID string
	Qty int64
	// Ints, when set, answers the buy with integers instead of an order id or an error, as a
	// legacy stock script would (see router's legacy scripts).
	Ints *IntReplies
	// Admit, when set, is who admission checks (the deny list, the buyer's attempts) in place
	// of UID: the logged-in user of a legacy script that names no buyer, whose every call is
	// a new made-up UID.
	Admit string
	// Reply writes the buy's reply as the client that sent it expects (set by who parsed
	// the command: the router's reply styles); nil: an order id, or the error.
	Reply Replier
}

// Replier writes a buy's reply.
type Replier interface {
	AppendBuyReply(dst []byte, req *BuyRequest, res BuyResult) []byte
}

// AppendReply appends the reply to the buy whose result is res, in r's reply style.
func (r *BuyRequest) AppendReply(dst []byte, res BuyResult) []byte {
	if r.Reply != nil {
		return r.Reply.AppendBuyReply(dst, r, res)
	}
	if res.Err != nil {
		return redcon.AppendError(dst, strings.NewReplacer("\r", " ", "\n", " ").Replace(res.Err.Error()))
	}
	return redcon.AppendBulkString(dst, res.OrderID)
}

// IntReplies are the integers a legacy stock script answers with.
type IntReplies struct {
	Success, SoldOut, Duplicate, NoSale int64
}

// ParseBuy parses SECKILL.BUY's arguments (after the command name): <sku> <uid> [qty].
// qty defaults to 1; its upper bound, the sale's per-user limit, is checked by the script.
func ParseBuy(args [][]byte) (BuyRequest, error) {
	if len(args) < 2 || len(args) > 3 {
		return BuyRequest{}, badArgs("wrong number of arguments for 'seckill.buy' command")
	}
	sku, uid, err := ParseSKUUID(args[0], args[1])
	if err != nil {
		return BuyRequest{}, err
	}
	req := BuyRequest{SKU: sku, UID: uid, Qty: 1}
	if len(args) == 3 {
		q, ok := sale.ParseCount(args[2])
		if !ok || q > sale.MaxLimit {
			return BuyRequest{}, badArgs("qty must be an integer from 1 to the per-user limit, got %s", quote(args[2]))
		}
		req.Qty = q
	}
	return req, nil
}

// ParseSKUUID checks a sku and a uid argument.
func ParseSKUUID(sku, uid []byte) (string, string, error) {
	if !sale.ValidID(sku) {
		return "", "", badArgs("sku must be 1-64 characters of [A-Za-z0-9_.:-], got %s", quote(sku))
	}
	if !sale.ValidID(uid) {
		return "", "", badArgs("uid must be 1-64 characters of [A-Za-z0-9_.:-], got %s", quote(uid))
	}
	return string(sku), string(uid), nil
}

// StatusRequest is SECKILL.STATUS <sku> <uid> [WAIT <ms>] parsed: Wait is how long to wait for
// the order's outcome (0: not at all).
type StatusRequest struct {
	SKU, UID string
	Wait     time.Duration
}

// ParseStatus checks SECKILL.STATUS's arguments (after the command's name). WAIT <ms> waits at
// most maxWait: a longer wait, or WAIT 0 (Redis's "until it comes"), waits maxWait.
func ParseStatus(args [][]byte, maxWait time.Duration) (StatusRequest, error) {
	if len(args) != 2 && len(args) != 4 {
		return StatusRequest{}, badArgs("wrong number of arguments for 'seckill.status' command: SECKILL.STATUS <sku> <uid> [WAIT <ms>]")
	}
	sku, uid, err := ParseSKUUID(args[0], args[1])
	if err != nil {
		return StatusRequest{}, err
	}
	req := StatusRequest{SKU: sku, UID: uid}
	if len(args) == 2 {
		return req, nil
	}
	if !strings.EqualFold(string(args[2]), "wait") {
		return StatusRequest{}, badArgs("syntax error: %s, where WAIT <ms> may follow the uid", quote(args[2]))
	}
	ms, err := strconv.ParseInt(string(args[3]), 10, 64)
	if err != nil || ms < 0 {
		return StatusRequest{}, badArgs("WAIT takes a whole number of milliseconds from 0, got %s", quote(args[3]))
	}
	req.Wait = maxWait
	if ms > 0 && ms < maxWait.Milliseconds() {
		req.Wait = time.Duration(ms) * time.Millisecond
	}
	return req, nil
}

// ParseSKU checks a lone sku argument.
func ParseSKU(b []byte) (string, error) {
	if !sale.ValidID(b) {
		return "", badArgs("sku must be 1-64 characters of [A-Za-z0-9_.:-], got %s", quote(b))
	}
	return string(b), nil
}

// quote shows a client's argument in an error, cut short if long.
func quote(b []byte) string {
	if len(b) > 80 {
		return strconv.Quote(string(b[:80])) + "..."
	}
	return strconv.Quote(string(b))
}

// WarmOptions are SECKILL.WARM's options.
type WarmOptions struct {
	// StartMs and EndMs bound the sale's window in Unix milliseconds; 0 means open-ended.
	StartMs, EndMs int64
	// Limit is the per-user limit: the most units one buyer may take. Default 1.
	Limit int64
	// Force re-warms a sale that is open.
	Force bool
	// Rate is the buys a second that every proxy together lets through to Redis; 0: no
	// rate. Burst is how many may come at once (default a tenth of Rate, at least 1).
	Rate, Burst int64
	// Buckets splits the stock into that many stock buckets, from 1 to sale.MaxBuckets; 0:
	// not given (a new sale has 1, a forced re-warm keeps the sale's).
	Buckets int64
}

// MaxRate bounds a sale's rate and burst.
const MaxRate = 10_000_000

// ParseRate reads RATE <n> [BURST <n>] (or RATE OFF) from args, as SECKILL.WARM and
// SECKILL.LIMIT take them, into rate and burst; a burst not given is a tenth of the rate.
func ParseRate(name string, val []byte, rate, burst *int64) error {
	if name == "RATE" && strings.EqualFold(string(val), "off") {
		*rate = 0
		return nil
	}
	n, ok := sale.ParseCount(val)
	if !ok || n > MaxRate {
		return badArgs("%s must be an integer from 1 to %d, got %s", name, MaxRate, quote(val))
	}
	if name == "RATE" {
		*rate = n
	} else {
		*burst = n
	}
	return nil
}

// defaultBurst fills in a burst not given: a tenth of the rate, at least 1.
func defaultBurst(rate, burst int64) int64 {
	if rate == 0 {
		return 0
	}
	if burst == 0 {
		return max(1, (rate+9)/10)
	}
	return burst
}

// ParseWarm parses SECKILL.WARM's arguments (after the command name):
// <sku> [START <unix-ms>] [END <unix-ms>] [LIMIT <per-user-qty>] [RATE <buys/s> [BURST <n>]]
// [FORCE], options in any order and case, each at most once.
func ParseWarm(args [][]byte) (string, WarmOptions, error) {
	opt := WarmOptions{Limit: 1}
	if len(args) == 0 {
		return "", opt, badArgs("wrong number of arguments for 'seckill.warm' command")
	}
	sku, err := ParseSKU(args[0])
	if err != nil {
		return "", opt, err
	}
	seen := map[string]bool{}
	for i := 1; i < len(args); i++ {
		name := strings.ToUpper(string(args[i]))
		if seen[name] {
			return "", opt, badArgs("%s given twice", name)
		}
		seen[name] = true
		if name == "FORCE" {
			opt.Force = true
			continue
		}
		if !warmValued[name] {
			return "", opt, badArgs("unknown option %s; expected START, END, LIMIT, RATE, BURST, BUCKETS or FORCE", quote(args[i]))
		}
		if i+1 >= len(args) {
			return "", opt, badArgs("%s needs a value", name)
		}
		i++
		if err := opt.set(name, args[i]); err != nil {
			return "", opt, err
		}
	}
	if err := opt.check(); err != nil {
		return "", opt, err
	}
	opt.Burst = defaultBurst(opt.Rate, opt.Burst)
	return sku, opt, nil
}

// warmValued are SECKILL.WARM's options that take a value.
var warmValued = map[string]bool{"START": true, "END": true, "LIMIT": true, "RATE": true, "BURST": true, "BUCKETS": true}

// set sets option name (one of warmValued) to v.
func (opt *WarmOptions) set(name string, v []byte) error {
	if name == "RATE" || name == "BURST" {
		if strings.EqualFold(string(v), "off") && name == "RATE" {
			return badArgs("RATE OFF is for SECKILL.LIMIT; leave RATE out for a sale with no rate")
		}
		return ParseRate(name, v, &opt.Rate, &opt.Burst)
	}
	n, ok := sale.ParseCount(v)
	if !ok {
		return badArgs("%s must be a positive integer, got %s", name, quote(v))
	}
	switch name {
	case "START":
		opt.StartMs = n
	case "END":
		opt.EndMs = n
	case "LIMIT":
		opt.Limit = n
	default:
		opt.Buckets = n
	}
	return nil
}

// check checks the options against their bounds and each other.
func (opt *WarmOptions) check() error {
	switch {
	case opt.Buckets > sale.MaxBuckets:
		return badArgs("BUCKETS must be from 1 to %d, got %d", sale.MaxBuckets, opt.Buckets)
	case opt.Limit > sale.MaxLimit:
		return badArgs("LIMIT must be from 1 to %d, got %d", sale.MaxLimit, opt.Limit)
	case opt.Burst != 0 && opt.Rate == 0:
		return badArgs("BURST needs RATE")
	case opt.EndMs != 0 && opt.EndMs <= opt.StartMs:
		return badArgs("END %d must be after START %d", opt.EndMs, opt.StartMs)
	}
	return nil
}

// LimitOptions are SECKILL.LIMIT's: a sale's new rate and burst (rate 0: no rate).
type LimitOptions struct{ Rate, Burst int64 }

// ParseLimit parses SECKILL.LIMIT's arguments (after the command name):
// <sku> RATE <buys/s> [BURST <n>], or <sku> RATE OFF.
func ParseLimit(args [][]byte) (string, LimitOptions, error) {
	var opt LimitOptions
	if len(args) != 3 && len(args) != 5 {
		return "", opt, badArgs("wrong number of arguments for 'seckill.limit' command; expected <sku> RATE <buys/s> [BURST <n>] or <sku> RATE OFF")
	}
	sku, err := ParseSKU(args[0])
	if err != nil {
		return "", opt, err
	}
	seen := map[string]bool{}
	for i := 1; i+1 < len(args); i += 2 {
		name := strings.ToUpper(string(args[i]))
		if name != "RATE" && name != "BURST" {
			return "", opt, badArgs("unknown option %s; expected RATE or BURST", quote(args[i]))
		}
		if seen[name] {
			return "", opt, badArgs("%s given twice", name)
		}
		seen[name] = true
		if err := ParseRate(name, args[i+1], &opt.Rate, &opt.Burst); err != nil {
			return "", opt, err
		}
	}
	if !seen["RATE"] {
		return "", opt, badArgs("RATE is required")
	}
	if opt.Rate == 0 && opt.Burst != 0 {
		return "", opt, badArgs("BURST makes no sense with RATE OFF")
	}
	opt.Burst = defaultBurst(opt.Rate, opt.Burst)
	return sku, opt, nil
}

// DenyOptions are SECKILL.DENY's: how long the uid is denied (0: until SECKILL.ALLOW).
type DenyOptions struct{ TTL time.Duration }

// MaxDenyTTL bounds SECKILL.DENY's TTL: a year.
const MaxDenyTTL = 365 * 24 * time.Hour

// ParseDeny parses SECKILL.DENY's arguments (after the command name): <uid> [TTL <seconds>].
func ParseDeny(args [][]byte) (string, DenyOptions, error) {
	var opt DenyOptions
	if len(args) != 1 && len(args) != 3 {
		return "", opt, badArgs("wrong number of arguments for 'seckill.deny' command; expected <uid> [TTL <seconds>]")
	}
	if !sale.ValidID(args[0]) {
		return "", opt, badArgs("uid must be 1-64 characters of [A-Za-z0-9_.:-], got %s", quote(args[0]))
	}
	if len(args) == 3 {
		if !strings.EqualFold(string(args[1]), "ttl") {
			return "", opt, badArgs("unknown option %s; expected TTL", quote(args[1]))
		}
		n, ok := sale.ParseCount(args[2])
		if !ok || time.Duration(n) > MaxDenyTTL/time.Second {
			return "", opt, badArgs("TTL must be an integer of seconds from 1 to %d, got %s", int64(MaxDenyTTL/time.Second), quote(args[2]))
		}
		opt.TTL = time.Duration(n) * time.Second
	}
	return string(args[0]), opt, nil
}
