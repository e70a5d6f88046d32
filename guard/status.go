package guard

import (
	"context"
	"strings"

	"seckill-proxy/sale"
)

// SECKILL.STATUS: a buyer's standing in a sale, from Redis alone.

// Status is a buyer's standing in a sale.
type Status struct {
	// State is "none", "pending", "confirmed", "rejected" or "cancelled".
	State   string
	OrderID string
	// Reason says why an order was rejected.
	Reason string
}

// String renders s as SECKILL.STATUS answers it: "none", "pending <id>", "confirmed <id>",
// "rejected <id> <reason>" or "cancelled <id>".
func (s Status) String() string {
	out := s.State
	if s.OrderID != "" {
		out += " " + s.OrderID
	}
	if s.Reason != "" {
		out += " " + s.Reason
	}
	return out
}

// Status reports uid's order in sku's sale, from Redis alone.
func (g *Guard) Status(ctx context.Context, sku, uid string) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	k, err := g.homeKeys(ctx, sku, uid, true)
	if err != nil {
		return Status{}, err
	}
	v, err := statusScript.Run(ctx, g.rc, k.ScriptKeys(), uid).Slice()
	if err != nil {
		return Status{}, unavailable(err)
	}
	// The bucket asked was this proxy's idea of the buyer's home; its meta says the sale's
	// buckets. A proxy that missed a re-warm into another layout asks again, at the home
	// they name.
	if tags, err := sale.ParseBuckets(sale.Field(v, 3)); err == nil {
		l := sale.Layout{SKU: sku, Tags: tags}
		if home := l.Keys(l.HomeIndex(uid)); home != k {
			if v, err = statusScript.Run(ctx, g.rc, home.ScriptKeys(), uid).Slice(); err != nil {
				return Status{}, unavailable(err)
			}
		}
	}
	if sale.Field(v, 0) == "" {
		return Status{State: "none"}, nil
	}
	st := Status{State: "pending", OrderID: sale.Field(v, 0)}
	if outcome := sale.Field(v, 1); outcome != "" {
		st.State, st.Reason, _ = strings.Cut(outcome, " ")
	}
	if sale.Field(v, 2) == "1" {
		st.State, st.Reason = "cancelled", ""
	}
	return st, nil
}
