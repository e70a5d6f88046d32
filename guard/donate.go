package guard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/sale"
)

// The donation path of a split sale (see buckets.go): a buy whose home bucket answered EMPTY
// asks the other buckets for its units (Donate), and the sweeper settles the reservations a
// stopped proxy left (SettleReservations).

// reservedErr answers a buyer whose earlier buy is still asking a split sale's buckets.
func reservedErr(sku, id string) error {
	return fmt.Errorf("%w order %s of sale %s is still being settled across the sale's buckets; try again", ErrBusy, id, sku)
}

// Donate finishes a buy that its home bucket answered EMPTY (Outcome.Donate): it asks the
// sale's other buckets, richest first by the last replies, for the units, then confirms the
// reservation at home with the order a donor made, or drops it when every bucket answered
// EMPTY (the sale is sold out: SOLDOUT, and the local flag). It runs on a goroutine of its
// own, with the proxy's cluster client: the last units of each bucket take this way, not the
// common buy. done gets the buyer's answer; a sold order is teed before (with
// buy.reply_after=kafka, done waits for Kafka's answer).
func (g *Guard) Donate(a *Attempt, done func(BuyResult)) {
	go func() {
		ctx, cancel := context.WithTimeout(g.ctx, 2*g.opt.Buy.CallTimeout)
		defer cancel()
		res, sold := g.donate(ctx, a)
		if !sold {
			done(res)
			return
		}
		if g.ReplyAfterKafka() {
			g.Tee(a, func(err error) { done(g.AfterKafka(a, err)) })
			return
		}
		g.Tee(a, nil)
		done(res)
	}()
}

// donateOn runs donate.lua on the donor bucket of keys, followed on the same connection by the
// WAIT a buy's call has (replicawait.go): a donor's order is told only once a replica holds it.
// A WAIT that comes back short is ErrNotKnown: the order, if it stands, is the sweeper's to
// publish, and the reservation at home the sweeper's to settle.
func (g *Guard) donateOn(ctx context.Context, keys []string, args ...any) ([]any, error) {
	m, err := g.rc.MasterForKey(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	want, timeout := g.ReplicasToWait(m.Options().Addr)
	if tag, ok := sale.TagOfKey(keys[0]); ok {
		g.mark(tag)
	}
	run := func(eval bool) ([]any, error) {
		pipe := m.Pipeline() // one connection: WAIT covers the script
		var call *redis.Cmd
		if eval {
			call = donateScript.Eval(ctx, pipe, keys, args...)
		} else {
			call = donateScript.EvalSha(ctx, pipe, keys, args...)
		}
		var acked *redis.Cmd
		if want > 0 {
			acked = pipe.Do(ctx, "WAIT", want, timeout.Milliseconds())
		}
		_, _ = pipe.Exec(ctx)
		v, err := call.Slice()
		if err != nil {
			return nil, err
		}
		if acked != nil {
			if n, err := acked.Int64(); err != nil || n < int64(want) {
				g.shortWait()
				return nil, ErrNotKnown
			}
		}
		return v, nil
	}
	v, err := run(false)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		v, err = run(true) // a new or promoted master: its script cache is empty
	}
	return v, err
}

func (g *Guard) donate(ctx context.Context, a *Attempt) (BuyResult, bool) {
	sl, home := a.lay, a.bucket
	sku, uid, qty := a.req.SKU, a.req.UID, strconv.FormatInt(a.req.Qty, 10)
	counters := g.countersFor(sku)
	donors := make([]int, 0, sl.l.K()-1)
	for i := range sl.l.Tags {
		if i != home {
			donors = append(donors, i)
		}
	}
	slices.SortStableFunc(donors, func(x, y int) int { return cmp.Compare(sl.stock[y].Load(), sl.stock[x].Load()) })
	end := func(how string) error {
		v, err := reservedScript.Run(ctx, g.rc, sl.keys[home], uid, a.orderID, qty, how).Slice()
		if err != nil {
			return err
		}
		if sale.Field(v, 0) == "GONE" && how == "drop" && strings.HasPrefix(sale.Field(v, 1), a.orderID+":") {
			return errors.New("the sweeper confirmed the order meanwhile")
		}
		return nil
	}
	fail := func(err error) (BuyResult, bool) {
		// The reservation stays for the sweeper, which settles it from Redis alone.
		g.stats.unavailable.Add(1)
		return BuyResult{Err: unavailable(fmt.Errorf("order %s of sale %s is reserved and will be settled: %w", a.orderID, sku, err))}, false
	}
	for _, d := range donors {
		v, err := g.donateOn(ctx, sl.keys[d], a.version, g.opt.Route, a.orderID, uid, qty,
			strconv.Itoa(sl.l.Tags[home]), g.opt.Instance)
		if err != nil {
			return fail(err)
		}
		switch code := sale.Field(v, 0); code {
		case "EMPTY":
			n, _ := strconv.ParseInt(sale.Field(v, 1), 10, 64)
			sl.stock[d].Store(n)
			continue
		case "OK":
			r := sale.ParseBuyReply(v)
			n, _ := strconv.ParseInt(r.Stock, 10, 64)
			sl.stock[d].Store(n)
			if err := end("confirm"); err != nil {
				return fail(err) // the donor's order is in its outbox: the sweeper confirms it
			}
			a.sold = r.Sold(sku, uid, a.req.Qty, g.opt.Instance)
			a.sold.Bucket, a.sold.Home = sl.l.Tags[d], sl.l.Tags[home]
			g.stats.successes.Add(1)
			g.stats.donated.Add(1)
			counters.successes.Add(1)
			counters.known.add(uid, a.orderID, r.Version, g.opt.Now(), g.opt.Buy.SoldOutBuyers)
			return BuyResult{OrderID: a.orderID}, true
		case "TOMB":
			return fail(errors.New("the sweeper is settling it"))
		default:
			// CLOSED, STALE or DRIFT: the sale changed under the buy; it sells nothing.
			if err := end("drop"); err != nil {
				return fail(err)
			}
			var res BuyResult
			a.reply = sale.Fields(v)
			g.settle(a, &res, maxRounds)
			return res, false
		}
	}
	if err := end("drop"); err != nil {
		return fail(err)
	}
	g.stats.soldOut.Add(1)
	counters.soldOut.Add(1)
	g.soldOut(sku)
	g.signal(eventSoldOut, sku)
	return BuyResult{Err: soldOut(sku)}, false
}

// settleAge is how old a reservation must be before the sweeper settles it: a live proxy
// finishes its donor steps well within it.
func (g *Guard) settleAge() time.Duration { return 4 * g.opt.Buy.CallTimeout }

// maxSettle bounds the reservations one sweep settles in one bucket.
const maxSettle = 100

// SettleReservations settles the reservations in bucket b of the split sale l that are older
// than settleAge at now (Redis's clock): reservations a proxy left when it stopped between
// buy.lua's EMPTY and its confirm or drop. For each, every other bucket answers in one atomic
// step (tomb.lua) whether it gave the units, and if it did not, closes the order id to
// donations for good; a bucket that gave them means confirm, none means drop. At most one
// bucket can have given (the proxy stops at the first gift), and a donate.lua still on its
// way meets the tombstone and gives nothing. The sweeper calls it under the bucket's lease.
func (g *Guard) SettleReservations(ctx context.Context, l sale.Layout, b int, now time.Time) error {
	k := l.Keys(b)
	cutoff := strconv.FormatInt(now.Add(-g.settleAge()).UnixMilli(), 10)
	members, err := g.rc.ZRangeArgs(ctx, redis.ZRangeArgs{Key: k.Reserved, Start: "-inf", Stop: cutoff, ByScore: true, Count: maxSettle}).Result()
	if err != nil {
		return err
	}
	home := k.ScriptKeys()
	for _, m := range members {
		id, rest, _ := strings.Cut(m, ":")
		qty, uid, ok := strings.Cut(rest, ":")
		if !ok {
			if err := g.rc.ZRem(ctx, k.Reserved, m).Err(); err != nil {
				return err
			}
			continue
		}
		donor := -1
		for i := range l.Tags {
			if i == b {
				continue
			}
			v, err := tombScript.Run(ctx, g.rc, l.Keys(i).ScriptKeys(), id).Text()
			if err != nil {
				return err
			}
			if v != "tomb" {
				donor = i
			}
		}
		how := "drop"
		if donor >= 0 {
			how = "confirm"
		}
		if err := reservedScript.Run(ctx, g.rc, home, uid, id, qty, how).Err(); err != nil {
			return err
		}
		g.stats.settled.Add(1)
		g.log.Warn("settled a reservation that a proxy left between the donor steps", zap.String("sku", l.SKU),
			zap.Int("bucket", l.Tags[b]), zap.String("order", id), zap.String("uid", uid), zap.String("outcome", how))
	}
	return nil
}
