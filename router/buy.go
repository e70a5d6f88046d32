package router

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/tidwall/redcon"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
)

// ParseBuy reads args, a KindBuy command of s's (Classify said so, cl). reply is set when the
// command fails before the guard (NOAUTH, permission, a wrong argument count, a bad
// argument), with the error to answer; else req is the buy, whose reply style (req.Reply) is
// the router's: the guard makes its reply from then on. Count it with Counted.
func (r *Router) ParseBuy(s *Session, cl Class, args [][]byte) (req guard.BuyRequest, reply []byte) {
	var err error
	if cl.cmd == nil || cl.cmd.flags&flagBuy == 0 { // a legacy script's call
		var ok bool
		if req, err, ok = r.checkedLegacyBuy(s, args); !ok {
			err = errors.New("ERR not a buy")
		}
	} else if _, _, err = r.check(s, &cl, args); err == nil {
		req, err = guard.ParseBuy(args[1:])
	}
	if err != nil {
		return req, errorReply(err)
	}
	req.Reply = r
	return req, nil
}

// AppendBuyReply appends the reply to req, as Serve writes it (a legacy script's integers,
// or the seeds' integers with buy.compat_replies), to dst.
func (r *Router) AppendBuyReply(dst []byte, req *guard.BuyRequest, res guard.BuyResult) []byte {
	if req != nil && req.Ints != nil {
		if n, ok := intReply(req.Ints, res); ok {
			return redcon.AppendInt(dst, n)
		}
	}
	if r.opt.CompatReplies {
		if n, ok := compatReply(res.Err); ok {
			return redcon.AppendInt(dst, n)
		}
	}
	if res.Err != nil {
		return appendError(dst, res.Err)
	}
	return redcon.AppendBulkString(dst, res.OrderID)
}

// Guard is the buy engine the router serves SECKILL commands with.
func (r *Router) Guard() *guard.Guard { return r.guard }

func errorReply(err error) []byte { return appendError(nil, err) }

// appendError appends err as WriteError writes it.
func appendError(dst []byte, err error) []byte { return redcon.AppendError(dst, errorText(err)) }

// BuyEngine runs buys that Serve has read and checked, and gives each its reply as
// AppendBuyReply makes it, in the order of reqs. The proxy's server is one: its buys run on
// the same engine as the event loop's (see package proxy).
type BuyEngine interface {
	RunBuys(ctx context.Context, reqs []guard.BuyRequest) [][]byte
}

// errNoBuyEngine answers the buys of a router that serves none (no server set one).
var errNoBuyEngine = errors.New("UNAVAILABLE no buy engine")

// SetBuyEngine has Serve run its buys on e. Call it before Serve.
func (r *Router) SetBuyEngine(e BuyEngine) { r.buys = e }

// writeBuys runs the valid buys as one batch and writes every buy's reply in order.
func (r *Router) writeBuys(ctx context.Context, buys []guard.BuyRequest, errs []error, w Writer) {
	var replies [][]byte
	if len(buys) > 0 && r.buys != nil {
		replies = r.buys.RunBuys(ctx, buys)
	}
	next := 0
	for _, perr := range errs {
		switch {
		case perr != nil:
			WriteError(w, perr)
			continue
		case replies == nil:
			WriteError(w, errNoBuyEngine)
		default:
			w.WriteRaw(replies[next])
		}
		next++
	}
}

// compatReply maps a buy's outcome to the seeds' integers. The answers made on every request
// of a flood (limited, duplicate) are told apart by type, with no errors.Is walk.
func compatReply(err error) (int64, bool) {
	switch err.(type) {
	case nil:
		return 1, true
	case *guard.LimitedError:
		return -2, true
	case *guard.DuplicateError:
		return -1, true
	}
	if errors.Is(err, guard.ErrSoldOut) {
		return 0, true
	}
	return 0, false
}

// cmdStatus: SECKILL.STATUS <sku> <uid> [WAIT <ms>]. With WAIT, a buyer whose order has no
// outcome yet waits for it (guard.WaitStatus), as a client waits in BLPOP: the client's
// context ends the wait when it leaves.
func (r *Router) cmdStatus(ctx context.Context, s *Session, args [][]byte) (Reply, error) {
	maxWait := r.opt.MaxStatusWait
	if maxWait <= 0 {
		maxWait = conf.Default().Status.MaxWait
	}
	req, err := guard.ParseStatus(args[1:], maxWait)
	if err != nil {
		return nil, err
	}
	var st guard.Status
	if req.Wait > 0 {
		keys := guard.ShareKeys(s.User, s.Remote)
		if !r.waitShares.Take(keys) {
			return nil, respError("BUSY this user, or this client address, has " + strconv.Itoa(r.waitShares.Most()) +
				" buyers waiting already (limits.client_share of status.max_waiters); poll SECKILL.STATUS")
		}
		defer r.waitShares.Release(keys, 1)
		st, err = r.guard.WaitStatus(ctx, req.SKU, req.UID, req.Wait)
	} else {
		st, err = r.guard.Status(ctx, req.SKU, req.UID)
	}
	if err != nil {
		return nil, err
	}
	return BulkString(st.String()), nil
}

// WatchOutcome starts a wait for uid's order in sku's sale, for a buyer's outcome channel
// (guard.Watch): the Waiter is nil when there is nothing to wait for (no order, or its
// outcome known). through: while Redis fails it (a failover), try again until ctx ends
// (guard.WatchThrough).
func (r *Router) WatchOutcome(ctx context.Context, sku, uid string, through bool) (*guard.Waiter, guard.Status, error) {
	switch {
	case r.guard == nil:
		return nil, guard.Status{}, respError("ERR outcome channels need the sales' guard")
	case through:
		return r.guard.WatchThrough(ctx, sku, uid, time.Time{})
	}
	return r.guard.Watch(ctx, sku, uid)
}
