package guard

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/sale"
)

// settle turns the buy script's reply for one attempt into the buyer's answer, or another
// round; and the reading of Redis's errors and replies it needs.

// maxRounds bounds the retries of one buy: NOSCRIPT, then a stale version.
const maxRounds = 3

// settle turns an attempt's reply into its result, or asks for another round.
func (g *Guard) settle(a *Attempt, res *BuyResult, round int) (retry bool) {
	if err := a.err; err != nil {
		if round+1 < maxRounds {
			switch {
			case redis.HasErrorPrefix(err, "NOSCRIPT"):
				a.NoScript()
				g.stats.noScript.Add(1)
				return true
			case isRedirect(err):
				g.rc.ReloadState(context.Background())
				return true
			}
		}
		g.stats.unavailable.Add(1)
		res.Err = unavailable(err)
		return false
	}
	r := sale.ParseBuyFields(a.reply)
	code, arg := r.Code, r.Arg
	if code == "CLOSED" && arg == "not warmed" {
		g.stats.closed.Add(1) // no sale: no counters of its own
		g.noSales.add(a.req.SKU, g.opt.Now().Add(g.opt.Buy.SoldOutReprobe), a.noSaleGen)
		res.Err = closed(arg)
		return false
	}
	counters := g.countersFor(a.req.SKU)
	switch code {
	case "OK":
		g.stats.successes.Add(1)
		counters.successes.Add(1)
		res.OrderID = arg
		counters.known.add(a.req.UID, arg, r.Version, g.opt.Now(), g.opt.Buy.SoldOutBuyers)
		if a.version != r.Version {
			g.versions.Store(a.req.SKU, r.Version)
		}
		a.sold = r.Sold(a.req.SKU, a.req.UID, a.req.Qty, g.opt.Instance)
		if a.lay != nil {
			a.sold.Bucket = a.lay.l.Tags[a.bucket]
			a.sold.Home = a.sold.Bucket
			n, _ := strconv.ParseInt(r.Stock, 10, 64)
			a.lay.stock[a.bucket].Store(n)
		}
		if r.Stock == "0" && a.lay == nil {
			// A split sale is sold out only when every bucket is: Donate says so.
			g.soldOut(a.req.SKU)
			g.signal(eventSoldOut, a.req.SKU)
		}
	case "DUPLICATE":
		if arg == a.orderID { // this attempt's own order: its call ran before, its reply was lost
			return g.settleOwnDuplicate(a, res, counters)
		}
		g.stats.duplicates.Add(1)
		counters.duplicates.Add(1)
		if a.version != "" {
			counters.known.add(a.req.UID, arg, a.version, g.opt.Now(), g.opt.Buy.SoldOutBuyers)
		}
		res.Err = &DuplicateError{OrderID: arg}
	case "SOLDOUT":
		g.stats.soldOut.Add(1)
		counters.soldOut.Add(1)
		if left, err := strconv.ParseInt(arg, 10, 64); err == nil && left <= 0 {
			g.soldOut(a.req.SKU)
		}
		res.Err = soldOut(a.req.SKU)
	case "CLOSED":
		g.stats.closed.Add(1)
		counters.closed.Add(1)
		if arg == sale.StateClosed || arg == saleEnded {
			// Closed (SECKILL.CLOSE), or past its end: answered from the flag until it lapses
			// (buy.sold_out_reprobe), then asked again, as a sold-out sale is. A proxy that
			// missed the close event learns it from the first buy's reply. "not started" is
			// not flagged: the sale opens at its start time.
			g.flags.SetClosed(a.req.SKU, arg, g.opt.Now(), a.flagGen)
		}
		res.Err = closed(arg)
	case "EMPTY":
		if a.lay == nil {
			g.stats.unavailable.Add(1)
			res.Err = unavailable(errors.New("a split sale's bucket answered for a proxy that did not know it was split"))
			return false
		}
		n, _ := strconv.ParseInt(sale.FieldAt(a.reply, 3), 10, 64)
		a.lay.stock[a.bucket].Store(n)
		a.donate = true
	case "RESERVED":
		g.stats.busy.Add(1)
		res.Err = reservedErr(a.req.SKU, arg)
	case "LIMIT":
		res.Err = g.limitAnswer(a, arg)
	case "DRIFT":
		res.Err = g.drifted(a.req.SKU, arg)
	case "STALE":
		// The sale was re-warmed (or is split, and this proxy did not know it): forget what
		// this proxy knew of the old version, and learn the buckets.
		g.versions.Store(a.req.SKU, arg)
		g.learnLayout(a.req.SKU, arg, sale.FieldAt(a.reply, 2))
		g.clearFlag(a.req.SKU)
		if round+1 < maxRounds {
			a.version = arg
			g.placeAttempt(a)
			return true
		}
		g.stats.unavailable.Add(1)
		res.Err = unavailable(errors.New("sale version kept changing"))
	default:
		g.stats.unavailable.Add(1)
		res.Err = unavailable(errors.New("unexpected script reply " + strconv.Quote(code)))
	}
	return false
}

// isRedirect: the call is worth sending again at once, to where the cluster's view (read
// again) says. Not CLUSTERDOWN: the node sees no majority (cut off, or the cluster failing
// over), and another round a moment later meets the same answer, each round held behind a
// WAIT on that master; the buyer is answered UNAVAILABLE at once (the script did not run),
// and a retry after the failover is served by the promoted master.
func isRedirect(err error) bool {
	return redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK") ||
		redis.HasErrorPrefix(err, "TRYAGAIN")
}

// settleOwnDuplicate answers an attempt whose call ran twice: the script answered DUPLICATE
// with the attempt's own order id, so its first run sold the order (a connection that died
// after the script and before its reply, and a call sent again). The buyer is told the order;
// it was not teed (the first reply never came), so the sweeper publishes it from the outbox.
// With buy.reply_after=kafka the order is not known to be in Kafka: not known (UNAVAILABLE),
// and a retry answers DUPLICATE with it.
func (g *Guard) settleOwnDuplicate(a *Attempt, res *BuyResult, c *skuCounters) bool {
	if g.opt.Buy.ReplyAfter == conf.ReplyAfterKafka {
		g.stats.unavailable.Add(1)
		g.stats.notKnown.Add(1)
		res.Err = unavailable(fmt.Errorf("order %s is in the outbox, not yet in Kafka (its call ran twice)", a.orderID))
		return false
	}
	g.stats.successes.Add(1)
	c.successes.Add(1)
	res.OrderID = a.orderID
	c.known.add(a.req.UID, a.orderID, a.version, g.opt.Now(), g.opt.Buy.SoldOutBuyers)
	return false
}

// limitAnswer is the answer to a buy the script found over the sale's per-user limit (arg),
// which this proxy learns for the sale version the buy knew (overLimit).
func (g *Guard) limitAnswer(a *Attempt, arg string) error {
	if n, err := strconv.ParseInt(arg, 10, 64); err == nil {
		g.learnLimit(a.req.SKU, a.version, n)
	}
	return badArgs("qty %d is above the per-user limit %s", a.req.Qty, arg)
}
