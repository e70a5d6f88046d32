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
	if _, none, err := g.admitStatus(sku, g.opt.Now()); none || err != nil {
		return Status{State: "none"}, err
	}
	return g.readStatus(ctx, sku, uid)
}

// readStatus is Status past admission.
func (g *Guard) readStatus(ctx context.Context, sku, uid string) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	k, err := g.homeKeys(ctx, sku, uid, true)
	if err != nil {
		return Status{}, err
	}
	gen := g.noSales.generation()
	g.waits.reads.Add(1)
	v, err := statusScript.Run(ctx, g.rc, k.ScriptKeys(), uid).Slice()
	if err != nil {
		return Status{}, unavailable(err)
	}
	g.learnStatus(sku, v, gen)
	// The bucket asked was this proxy's idea of the buyer's home; its meta says the sale's
	// buckets. A proxy that missed a re-warm into another layout asks again, at the home
	// they name.
	if home, moved := statusHome(sku, uid, k, v); moved {
		g.waits.reads.Add(1)
		if v, err = statusScript.Run(ctx, g.rc, home.ScriptKeys(), uid).Slice(); err != nil {
			return Status{}, unavailable(err)
		}
	}
	return statusOf(v, 0), nil
}

// statusHome is the home bucket of uid by the buckets that status.lua's reply v names, and
// whether it is another than k, the bucket asked.
func statusHome(sku, uid string, k sale.Keys, v []any) (sale.Keys, bool) {
	tags, err := sale.ParseBuckets(sale.Field(v, 0))
	if err != nil {
		return k, false
	}
	l := sale.Layout{SKU: sku, Tags: tags}
	home := l.Keys(l.HomeIndex(uid))
	return home, home != k
}

// statusOf is the i-th buyer's status in status.lua's reply v.
func statusOf(v []any, i int) Status {
	id, outcome, released := sale.Field(v, 1+3*i), sale.Field(v, 2+3*i), sale.Field(v, 3+3*i)
	if id == "" {
		return Status{State: "none"}
	}
	st := Status{State: "pending", OrderID: id}
	if outcome != "" {
		st.State, st.Reason, _ = strings.Cut(outcome, " ")
	}
	if released == "1" {
		st.State, st.Reason = "cancelled", ""
	}
	return st
}
