package sale

import (
	"fmt"
	"strconv"
	"strings"
)

// The one reading of a sold order from what Redis holds or answers: the buy script's reply
// for one buy, the release script's reply, and an outbox entry. The scripts write these
// (guard/lua/buy.lua, release.lua); everything that reads them reads them here.

// Field reads field i of a script's reply as go-redis decodes it (strings and int64s): as a
// string, "" when it is missing or of another type.
func Field(reply []any, i int) string {
	if i < 0 || i >= len(reply) {
		return ""
	}
	switch v := reply[i].(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// BuyReply is the buy script's answer for one buy: {code, arg, ...}. For "OK", arg is the
// order id, then come the sale version, the stock left, the order's outbox entry and the time
// of the buy (Redis's, Unix ms); the other codes carry their argument only (DUPLICATE's order
// id, SOLDOUT's stock, CLOSED's reason, STALE's version, DRIFT's route).
type BuyReply struct {
	Code, Arg string
	Version   string
	Stock     string
	EntryID   string
	TS        int64
}

// ParseBuyReply reads one buy's reply, as go-redis decodes it.
func ParseBuyReply(reply []any) BuyReply {
	return ParseBuyFields(Fields(reply))
}

// ParseBuyFields reads one buy's reply, each element as Field gives it (resp.DecodeRows
// gives a call's replies so).
func ParseBuyFields(f []string) BuyReply {
	r := BuyReply{Code: FieldAt(f, 0), Arg: FieldAt(f, 1)}
	if r.Code == "OK" {
		r.Version, r.Stock, r.EntryID = FieldAt(f, 2), FieldAt(f, 3), FieldAt(f, 4)
		r.TS, _ = strconv.ParseInt(FieldAt(f, 5), 10, 64)
	}
	return r
}

// Fields is each element of a script's reply as Field gives it.
func Fields(reply []any) []string {
	if reply == nil {
		return nil
	}
	f := make([]string, len(reply))
	for i := range reply {
		f[i] = Field(reply, i)
	}
	return f
}

// FieldAt is f[i], or "" past its end.
func FieldAt(f []string, i int) string {
	if i < 0 || i >= len(f) {
		return ""
	}
	return f[i]
}

// Sold is the order an OK reply made, for uid's buy of qty in sku, by the proxy named by.
func (r BuyReply) Sold(sku, uid string, qty int64, by string) Sold {
	v, _ := strconv.ParseInt(r.Version, 10, 64)
	return Sold{Kind: TypeOrder, OrderID: r.Arg, SKU: sku, UID: uid, Qty: qty, Version: v, EntryID: r.EntryID, TS: r.TS, By: by}
}

// ReleaseReply is the release script's answer: {code, arg, ...}. For "OK": the order id, the
// units given back, the stock after, the release's outbox entry, its time (Unix ms), the
// sale version and the order's quantity; ALREADY carries the order id, DRIFT the sale's route,
// NONE nothing.
type ReleaseReply struct {
	Code, Arg    string
	Units, Stock int64
	Sold         Sold // the release, for Kafka (with Code "OK")
}

// ParseReleaseReply reads the release script's reply for uid in sku, released by the proxy
// named by.
func ParseReleaseReply(reply []any, sku, uid, by string) ReleaseReply {
	r := ReleaseReply{Code: Field(reply, 0), Arg: Field(reply, 1)}
	if r.Code != "OK" {
		return r
	}
	num := func(i int) int64 { n, _ := strconv.ParseInt(Field(reply, i), 10, 64); return n }
	r.Units, r.Stock = num(2), num(3)
	r.Sold = Sold{Kind: TypeRelease, OrderID: r.Arg, SKU: sku, UID: uid, Qty: num(7), Version: num(6),
		EntryID: Field(reply, 4), TS: num(5), By: by}
	return r
}

// SoldFromEntry reads an outbox entry of the bucket with hash tag tag (Tag: the SKU itself
// for a sale of one bucket; its ID and its fields, as XRANGE gives them) as the scripts wrote
// it. An entry that a donor bucket wrote names its buyer's home bucket ("home"). An entry
// without an order id or a uid, with a uid that is not one, or with a number that is not one,
// is ErrMalformed. A type it does not know is kept: the sink,
// which knows the message versions, judges it.
func SoldFromEntry(tag, id string, values map[string]any) (Sold, error) {
	str := func(k string) string { v, _ := values[k].(string); return v }
	var bad []string
	num := func(k string) int64 {
		n, err := strconv.ParseInt(str(k), 10, 64)
		if err != nil {
			bad = append(bad, k+" "+strconv.Quote(str(k))+" is not a number")
		}
		return n
	}
	kind := str("type")
	if kind == "" {
		kind = TypeOrder
	}
	sku, bucket := SplitTag(tag)
	s := Sold{Kind: kind, OrderID: str("order"), SKU: sku, UID: str("uid"), Qty: num("qty"), Version: num("version"),
		EntryID: id, TS: num("ts"), By: str("by"), Bucket: bucket, Home: bucket}
	if h := str("home"); h != "" {
		s.Home = int(num("home"))
	}
	if s.OrderID == "" {
		bad = append(bad, "no order id")
	}
	if s.UID == "" || strings.ContainsAny(s.UID, " \r\n") {
		bad = append(bad, "uid "+strconv.Quote(s.UID)+" is not one")
	}
	if len(bad) > 0 {
		return s, fmt.Errorf("%w: %s", ErrMalformed, strings.Join(bad, "; "))
	}
	return s, nil
}

// EntryFields are the fields of s's outbox entry, as the scripts write them (for tests and
// tools that write entries as the scripts would).
func EntryFields(s Sold) []string {
	f := []string{"order", s.OrderID, "version", strconv.FormatInt(s.Version, 10), "uid", s.UID,
		"qty", strconv.FormatInt(s.Qty, 10), "ts", strconv.FormatInt(s.TS, 10), "by", s.By}
	if s.Kind == TypeRelease {
		f = append([]string{"type", TypeRelease}, f...)
	}
	if s.Home != s.Bucket {
		f = append(f, "home", strconv.Itoa(s.Home))
	}
	return f
}
