package guard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/xid"
	"github.com/tidwall/redcon"

	"seckill-proxy/conf"
	"seckill-proxy/guard/admit"
	"seckill-proxy/internal/resp"
	"seckill-proxy/sale"
)

// This file is the buy path for an event loop, which runs it without a goroutine or a Redis
// client of its own per buy: Local answers what the proxy can without Redis; Start admits
// the rest (one Attempt each); the loop groups attempts by master and SKU, writes each group's
// script call (AppendCall) on its own connection to the master, and hands the raw reply to
// SettleCall, which says for each attempt its result, or where to send it again; Tee hands
// what was sold to Kafka, and Finish ends an attempt. The outcomes and counters are
// the engine's alone: package proxy runs it, on an event loop's core or on the core that
// serves the router's buys.

// local answers a buy with no network call, from admission (see admission.go) and the flags:
// a denied or over-eager buyer, a closed sale, a sold-out one (DUPLICATE for a buyer the flag
// knows), a buyer this proxy sold to, a sale whose rate is spent. ok false: the buy must go
// to Redis.
func (g *Guard) local(r *BuyRequest, now time.Time) (res BuyResult, ok bool) {
	h := admit.Hash(r.UID)
	ha := h
	if r.Admit != "" {
		ha = admit.Hash(r.Admit)
	}
	if err := g.admitBuyer(r, ha, now); err != nil {
		return BuyResult{Err: err}, true
	}
	flagged, closedWhy, buyers := g.flags.Get(r.SKU, now)
	if !flagged {
		c, ok := g.counters(r.SKU)
		if ok {
			g.touch(r.SKU, c, now)
			if id, dup := c.known.order(h, now, g.opt.Buy.SoldOutReprobe); dup {
				g.adm.knownDuplicates.Add(1)
				g.stats.duplicates.Add(1)
				c.duplicates.Add(1)
				c.local.Add(1)
				return BuyResult{Err: &DuplicateError{OrderID: id}}, true
			}
		}
		if !ok {
			if err := g.admitUnknown(r.SKU, now); err != nil {
				return BuyResult{Err: err}, true
			}
		}
		if err := g.overLimit(r, c); err != nil {
			return BuyResult{Err: err}, true
		}
		if err := g.admitRate(r.SKU, c, now); err != nil {
			return BuyResult{Err: err}, true
		}
		return BuyResult{}, false
	}
	if buyers.reserved(r.UID) {
		return BuyResult{}, false // Redis answers a reservation (RESERVED), never the flag
	}
	c := g.countersFor(r.SKU)
	g.touch(r.SKU, c, now)
	c.local.Add(1)
	g.stats.localSoldOut.Add(1)
	switch id, dup := buyers.order(r.UID); {
	case closedWhy != "":
		g.stats.closed.Add(1)
		c.closed.Add(1)
		res.Err = c.closedErr
		if closedWhy == saleEnded {
			res.Err = c.endedErr
		}
	case dup:
		g.stats.duplicates.Add(1)
		c.duplicates.Add(1)
		res.Err = &DuplicateError{OrderID: id}
	default:
		g.stats.soldOut.Add(1)
		c.soldOut.Add(1)
		res.Err = c.soldOutErr
	}
	return res, true
}

// newAttempt starts a buy's way through the script: its order id, the sale version this
// proxy knows, and the script's keys.
func (g *Guard) newAttempt(r *BuyRequest) *Attempt {
	v, _ := g.versions.Load(r.SKU)
	ver, _ := v.(string)
	a := &Attempt{req: *r, orderID: xid.New().String(), version: ver, noSaleGen: g.noSales.generation(), flagGen: g.flags.Gen()}
	g.placeAttempt(a)
	return a
}

// Local counts a buy and answers it if the proxy can without Redis (admission, the flags); ok false:
// call Start.
func (g *Guard) Local(r *BuyRequest, now time.Time) (res BuyResult, ok bool) {
	g.stats.buys.Add(1)
	return g.local(r, now)
}

// Start admits a buy to Redis: an Attempt (holding a copy of r), or the error to answer
// (Kafka not taking orders with buy.reply_after=kafka, or limits.max_inflight buys in flight
// already).
func (g *Guard) Start(r *BuyRequest) (*Attempt, error) {
	if g.opt.Buy.ReplyAfter == conf.ReplyAfterKafka && (g.opt.Publisher == nil || !g.opt.Publisher.Healthy()) {
		g.stats.unavailable.Add(1)
		return nil, unavailable(errors.New("kafka is not taking orders"))
	}
	slot, ok := g.waitSlot(r.SKU)
	if !ok {
		return nil, errShed(r.SKU, int(g.adm.maxWaiting.Load()))
	}
	if !g.inflight.TryAcquire(1) {
		if slot != nil {
			slot.Add(-1)
		}
		g.stats.busy.Add(1)
		return nil, ErrBusy
	}
	a := g.newAttempt(r)
	a.waitSlot = slot
	return a, nil
}

// Finish ends an attempt that Start admitted.
func (g *Guard) Finish(a *Attempt) {
	a.release()
	g.inflight.Release(1)
}

// SKU is the attempt's SKU; Group says which attempts may share one script call: the same
// SKU, stock bucket, sale version and way of calling the script.
func (a *Attempt) SKU() string { return a.req.SKU }

// Tag is the hash tag of the keys the attempt's call goes to (made once per sale or bucket):
// the master that owns it runs the call.
func (a *Attempt) Tag() string { return a.tag }

// Group is the key of the script call an attempt may share.
func (a *Attempt) Group() CallGroup {
	g := CallGroup{SKU: a.req.SKU, Version: a.version, Eval: a.useEval}
	if a.lay != nil {
		g.Bucket = a.lay.l.Tags[a.bucket]
	}
	return g
}

// CallGroup identifies the attempts that one script call may carry.
type CallGroup struct {
	SKU, Version string
	// Bucket is the tag number of the stock bucket the call goes to (0: the sale's own keys).
	Bucket int
	Eval   bool
}

// Tag is the hash tag of the call's keys: the master that owns it runs the call.
func (c CallGroup) Tag() string { return sale.Tag(c.SKU, c.Bucket) }

// MaxBuysPerCall bounds the buys of one script call, and so how long it holds Redis.
const MaxBuysPerCall = 64

// MasterOf is the address of the node that owns the keys of hash tag tag (CallGroup.Tag: a
// SKU, or one of its stock buckets), from the slot map.
func (g *Guard) MasterOf(ctx context.Context, tag string) (string, error) {
	m, err := g.rc.MasterForKey(ctx, sale.Key(tag, "stock"))
	if err != nil {
		return "", err
	}
	return m.Options().Addr, nil
}

// AppendCall appends to dst the RESP of one call of buy.lua for as, which share a CallGroup
// (at most MaxBuysPerCall of them), in their order: EVALSHA, or EVAL after a NOSCRIPT.
func (g *Guard) AppendCall(dst []byte, as []*Attempt) []byte {
	g.stats.scripts.Add(int64(len(as)))
	first := as[0]
	g.markCall(first)
	dst = redcon.AppendArray(dst, 3+len(first.keys)+3+4*len(as))
	if first.useEval {
		dst = redcon.AppendBulkString(dst, "EVAL")
		dst = redcon.AppendBulkString(dst, buyLua)
	} else {
		dst = redcon.AppendBulkString(dst, "EVALSHA")
		dst = redcon.AppendBulkString(dst, buyScript.Hash())
	}
	dst = redcon.AppendBulkString(dst, strconv.Itoa(len(first.keys)))
	for _, k := range first.keys {
		dst = redcon.AppendBulkString(dst, k)
	}
	// ARGV: the sale version, the caller's route, whether another bucket may give units, then
	// per buy its uid, quantity, order id and this proxy's name.
	dst = redcon.AppendBulkString(dst, first.version)
	dst = redcon.AppendBulkString(dst, g.opt.Route)
	dst = redcon.AppendBulkString(dst, g.donors(first))
	return g.appendBuys(dst, as)
}

// MaxGroupsPerCall bounds the SKUs (CallGroups) of one AppendManyCall, and MaxBuysPerManyCall
// its buys: how long one call holds its master.
const (
	MaxGroupsPerCall   = 64
	MaxBuysPerManyCall = 4 * MaxBuysPerCall
)

// AppendManyCall appends to dst one call of buymany.lua for groups (at most
// MaxGroupsPerCall, MaxBuysPerManyCall buys in all), each the attempts of one CallGroup that
// AppendCall would have sent alone, whose keys the same master owns; EVAL if eval (its last
// EVALSHA answered NOSCRIPT), else EVALSHA. Its reply has one value per group, each what
// AppendCall's would have been, or an error: SettleMany reads it.
func (g *Guard) AppendManyCall(dst []byte, groups [][]*Attempt, eval bool) []byte {
	n := 3 + 2
	for _, as := range groups {
		n += 4 + 4*len(as)
	}
	dst = redcon.AppendArray(dst, n)
	if eval {
		dst = redcon.AppendBulkString(dst, "EVAL")
		dst = redcon.AppendBulkString(dst, buyManyLua)
	} else {
		dst = redcon.AppendBulkString(dst, "EVALSHA")
		dst = redcon.AppendBulkString(dst, buyManyScript.Hash())
	}
	dst = redcon.AppendBulkString(dst, "0")
	dst = redcon.AppendBulkString(dst, sale.SaleKeyPrefix)
	dst = redcon.AppendBulkString(dst, g.opt.Route)
	for _, as := range groups {
		g.stats.scripts.Add(int64(len(as)))
		first := as[0]
		g.markCall(first)
		dst = redcon.AppendBulkString(dst, first.tag)
		dst = redcon.AppendBulkString(dst, first.version)
		dst = redcon.AppendBulkString(dst, g.donors(first))
		dst = redcon.AppendBulkInt(dst, int64(len(as)))
		dst = g.appendBuys(dst, as)
	}
	return dst
}

// donors is buy.lua's donors argument for a's call: "1" when another bucket of its split sale
// may still give units.
func (g *Guard) donors(a *Attempt) string {
	if a.lay != nil && a.lay.donorsMayHave(a.bucket) {
		return "1"
	}
	return "0"
}

// appendBuys appends each buy's uid, quantity, order id and this proxy's name.
func (g *Guard) appendBuys(dst []byte, as []*Attempt) []byte {
	for _, a := range as {
		dst = redcon.AppendBulkString(dst, a.req.UID)
		dst = redcon.AppendBulkInt(dst, a.req.Qty)
		dst = redcon.AppendBulkString(dst, a.orderID)
		dst = redcon.AppendBulkString(dst, g.opt.Instance)
	}
	return dst
}

// NotHere says whether raw, one group's value in a buymany.lua reply, is its NOTHERE error:
// its keys were not all on the master, nothing of it ran, and its attempts go again alone.
func NotHere(raw []byte) bool { return bytes.HasPrefix(raw, []byte("-NOTHERE ")) }

// Outcome is what became of one attempt of a script call.
type Outcome struct {
	// Result is the buyer's answer, unless Retry.
	Result BuyResult
	// Retry: send the attempt again (a stale sale version, NOSCRIPT); to Addr if set (the slot
	// moved: MOVED; or, with Ask, is moving: ASKING first).
	Retry bool
	Addr  string
	Ask   bool
	// Sold: the script sold the order; Tee it.
	Sold bool
	// Donate: the buy's home bucket of a split sale had too few units and reserved the buyer;
	// finish it with Donate, whose answer is the buyer's.
	Donate bool
}

// SettleCall takes the raw reply of one script call for as (round counts the calls an
// attempt has had before this one) and appends each attempt's outcome to out.
func (g *Guard) SettleCall(as []*Attempt, raw []byte, round int, replicated bool, out []Outcome) []Outcome {
	replies, err := resp.DecodeRows(raw)
	if errors.Is(err, resp.ErrReply) || (err == nil && len(replies) != len(as)) {
		err = fmt.Errorf("buy script answered %q for %d buys", clip(raw), len(as))
	}
	for i, a := range as {
		a.err, a.reply = err, nil // each attempt its own reply, or the call's error
		if err == nil {
			a.reply = replies[i]
		}
		var o Outcome
		if addr, ask, ok := redirectOf(err); ok && round+1 < maxRounds {
			o.Retry, o.Addr, o.Ask = true, addr, ask
			if !ask && i == 0 {
				g.rc.ReloadState(context.Background()) // the slot moved for good: learn where
			}
		} else if !replicated && err == nil {
			// The script ran, on a master no replica acknowledged: nothing it said is
			// told, teed or taken as fact here (replicawait.go).
			g.stats.unavailable.Add(1)
			g.stats.notKnown.Add(1)
			o.Result = BuyResult{Err: unavailable(ErrNotKnown)}
		} else {
			o.Retry = g.settle(a, &o.Result, round)
			o.Sold = !o.Retry && a.sold.OrderID != ""
			o.Donate = !o.Retry && a.donate
		}
		out = append(out, o)
	}
	return out
}

// TimedOut answers an attempt whose call Redis did not answer within buy.call_timeout. The
// script may still run: a retry by the buyer answers DUPLICATE with its order.
func (g *Guard) TimedOut(*Attempt) BuyResult {
	g.stats.unavailable.Add(1)
	return BuyResult{Err: notKnown(errors.New("redis did not answer within " + g.opt.Buy.CallTimeout.String()))}
}

// notKnown is the UNAVAILABLE of a buy that may have run: it says so, and how to learn what
// came of it.
func notKnown(err error) error {
	return unavailable(fmt.Errorf("%v: the outcome is not known; send the same buy again (it answers DUPLICATE with the order if there is one) or ask SECKILL.STATUS", err))
}

// Unreached answers an attempt whose call could not reach Redis (no master known for its
// slot, a node being redialled), or whose connection failed before the call's reply came:
// then the script may have run, and a retry by the buyer answers DUPLICATE with its order.
func (g *Guard) Unreached(_ *Attempt, err error) BuyResult {
	g.stats.unavailable.Add(1)
	if errors.Is(err, ErrNoReplica) || errors.Is(err, ErrNoCopy) {
		return BuyResult{Err: unavailable(err)} // it did not run
	}
	return BuyResult{Err: notKnown(fmt.Errorf("redis: %w", err))}
}

// Late takes the reply of a call whose attempts were answered TimedOut already: what it sold
// is teed (their buyers learn their orders by retrying), and nothing is counted twice. A
// call that no replica acknowledged (replicated false) tees nothing: its orders, if they
// stand, stay in the outbox for the sweeper, which publishes them once a replica holds them.
func (g *Guard) Late(as []*Attempt, raw []byte, replicated bool) {
	replies, err := resp.DecodeRows(raw)
	if err != nil || len(replies) != len(as) || !replicated {
		return
	}
	for i, a := range as {
		r := sale.ParseBuyFields(replies[i])
		if r.Code != "OK" || g.opt.Publisher == nil {
			continue
		}
		s := r.Sold(a.req.SKU, a.req.UID, a.req.Qty, g.opt.Instance)
		if a.lay != nil {
			s.Bucket = a.lay.l.Tags[a.bucket]
			s.Home = s.Bucket
		}
		g.opt.Publisher.Publish(s, nil)
	}
}

// Tee hands a sold attempt's order to Kafka. With buy.reply_after=kafka, done is called once
// Kafka has acknowledged it (nil) or has not (the error); the buyer is answered then, with
// AfterKafka's result.
func (g *Guard) Tee(a *Attempt, done func(error)) {
	if g.opt.Publisher == nil {
		if done != nil {
			done(errors.New("no publisher"))
		}
		return
	}
	g.opt.Publisher.Publish(a.sold, done)
}

// TeeAll hands many sold attempts' orders to Kafka at once (with buy.reply_after=lua).
func (g *Guard) TeeAll(as []*Attempt) {
	if g.opt.Publisher == nil || len(as) == 0 {
		return
	}
	ss := make([]sale.Sold, len(as))
	for i, a := range as {
		ss[i] = a.sold
	}
	g.opt.Publisher.PublishBatch(ss)
}

// ReplyAfterKafka says whether buyers are answered only once Kafka has their orders.
func (g *Guard) ReplyAfterKafka() bool { return g.opt.Buy.ReplyAfter == conf.ReplyAfterKafka }

// AfterKafka is a sold attempt's result once Kafka has answered for its order: the order id,
// or UNAVAILABLE (the order is in the outbox, and will be delivered).
func (g *Guard) AfterKafka(a *Attempt, err error) BuyResult {
	if err == nil {
		return BuyResult{OrderID: a.sold.OrderID}
	}
	g.stats.unavailable.Add(1)
	return BuyResult{Err: notKnown(fmt.Errorf("kafka: order %s is in the outbox, not yet in Kafka (%v)", a.sold.OrderID, err))}
}

// redirectOf reads a MOVED or ASK error: the node to send the call to.
func redirectOf(err error) (addr string, ask, ok bool) {
	if err == nil {
		return "", false, false
	}
	f := strings.Fields(err.Error())
	if len(f) != 3 || (f[0] != "MOVED" && f[0] != "ASK") {
		return "", false, false
	}
	return f[2], f[0] == "ASK", true
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

var _ redis.Error = resp.ReplyError("") // go-redis reads the buy script's errors as Redis's

// CallTimeout bounds one call to Redis (buy.call_timeout).
func (g *Guard) CallTimeout() time.Duration { return g.opt.Buy.CallTimeout }
