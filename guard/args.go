package guard

import (
	"strconv"
	"strings"

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
}

// ParseWarm parses SECKILL.WARM's arguments (after the command name):
// <sku> [START <unix-ms>] [END <unix-ms>] [LIMIT <per-user-qty>] [FORCE], options in any
// order and case, each at most once.
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
		var dst *int64
		switch name {
		case "START":
			dst = &opt.StartMs
		case "END":
			dst = &opt.EndMs
		case "LIMIT":
			dst = &opt.Limit
		default:
			return "", opt, badArgs("unknown option %s; expected START, END, LIMIT or FORCE", quote(args[i]))
		}
		if i+1 >= len(args) {
			return "", opt, badArgs("%s needs a value", name)
		}
		i++
		n, ok := sale.ParseCount(args[i])
		if !ok {
			return "", opt, badArgs("%s must be a positive integer, got %s", name, quote(args[i]))
		}
		*dst = n
	}
	if opt.Limit > sale.MaxLimit {
		return "", opt, badArgs("LIMIT must be from 1 to %d, got %d", sale.MaxLimit, opt.Limit)
	}
	if opt.EndMs != 0 && opt.EndMs <= opt.StartMs {
		return "", opt, badArgs("END %d must be after START %d", opt.EndMs, opt.StartMs)
	}
	return sku, opt, nil
}
