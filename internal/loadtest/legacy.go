package loadtest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/sale"
)

// seedsStockScript is the seeds' stock script as their services carry it, comments and all:
// the proxy recognises it by its normalised body.
const seedsStockScript = `-- deduct stock for a buyer, once
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return -1 end
local current_stock = tonumber(redis.call('GET', KEYS[1]) or "0")
if current_stock < tonumber(ARGV[2]) then return 0 end
redis.call('DECRBY', KEYS[1], tonumber(ARGV[2]))
redis.call('HSET', KEYS[2], ARGV[1], 1)
return 1
`

// legacyOrderPrefix marks, in Result.Orders, the uid of a legacy buy that got 1: the seeds'
// script answers no order id, which legacyOrders looks up afterwards.
const legacyOrderPrefix = "legacy:"

// LegacyBuyer is the seeds' SeckillManager, unchanged: a local sold-out map answers at once
// once the script has said 0; else EVALSHA (EVAL on NOSCRIPT) of the seeds' script on the
// seeds' keys. 1 is an order, 0 sold out, -1 a repeat buyer.
func LegacyBuyer(c redis.UniversalClient, sku string, qty int) (Buyer, func(context.Context, []string) []result) {
	script := redis.NewScript(seedsStockScript)
	keys := []string{"seckill:stock:" + sku, "seckill:buyers:" + sku}
	var soldOut atomic.Bool
	one := func(ctx context.Context, uid string) (string, error) {
		if soldOut.Load() {
			return "", errors.New(ReplySoldOut + " " + sku)
		}
		n, err := script.Run(ctx, c, keys, uid, qty).Int64()
		switch {
		case err != nil:
			return "", err
		case n == 1:
			return legacyOrderPrefix + uid, nil
		case n == 0:
			soldOut.Store(true)
			return "", errors.New(ReplySoldOut + " " + sku)
		}
		return "", errors.New(ReplyDuplicate + " " + uid)
	}
	many := func(ctx context.Context, uids []string) []result {
		out := make([]result, len(uids))
		for i, u := range uids {
			out[i].id, out[i].err = one(ctx, u)
		}
		return out
	}
	return one, many
}

// legacyOrders turns the uids LegacyBuyer marked into the order ids the proxy gave them.
func legacyOrders(ctx context.Context, rc redis.UniversalClient, sku string, marked []string) ([]string, error) {
	buyers := sale.KeysFor(sku).Buyers
	out := make([]string, 0, len(marked))
	for _, m := range marked {
		uid, ok := strings.CutPrefix(m, legacyOrderPrefix)
		if !ok {
			out = append(out, m)
			continue
		}
		v, err := rc.HGet(ctx, buyers, uid).Result() // "<order id>:<qty>"
		if err != nil {
			return nil, err
		}
		id, _, _ := strings.Cut(v, ":")
		out = append(out, id)
	}
	return out, nil
}
