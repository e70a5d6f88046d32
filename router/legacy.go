package router

import (
	"bytes"
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rs/xid"

	"seckill-proxy/conf"
	"seckill-proxy/guard"
	"seckill-proxy/internal/luacanon"
	"seckill-proxy/sale"
)

// Legacy stock scripts: a service built on the seeds' design does not send SECKILL.BUY but
// EVALSHA (or EVAL) of its own stock script on its own key names, which on a cluster cannot
// run at all (its keys sit in different slots). The proxy recognises those scripts by their
// meaning, as internal/luacanon reads it (whatever their comments, whitespace, quotes and the
// names of their locals, and whether they read KEYS and ARGV directly or through locals), or
// by the SHA1 of a copy it has seen, and runs each call as a SECKILL.BUY of the SKU named in
// KEYS[1], answered with the integer the script would have returned. Everything a buy does is
// done: the proxy's own atomic script, the order id, the outbox, Kafka, MySQL, the local
// sold-out flag, and admission.

// LegacyStockPrefix is the seeds' stock key: seckill:stock:<sku>.
const LegacyStockPrefix = sale.LegacyStockPrefix

// legacyScript is one recognised stock script: where its uid and qty are (1-based ARGV
// positions; uidArg 0: none, every call a new buyer), and its replies.
type legacyScript struct {
	name           string
	keys           int // KEYS it takes
	uidArg, qtyArg int
	replies        guard.IntReplies
	// prefix and suffix surround the SKU in KEYS[1].
	prefix, suffix string
}

// LegacyBuyScript is the seeds' buy: KEYS stock, buyers; ARGV uid, qty. 1 success, 0 sold out
// (or no stock key), -1 a repeat buyer.
//
//go:embed lua/seeds_buy.lua
var LegacyBuyScript string

// LegacyDeductScript is the seeds' variant without a buyer: KEYS stock; ARGV qty. 1 success,
// 0 sold out, -1 no such item. Off unless buy.legacy_uidless.
//
//go:embed lua/seeds_deduct.lua
var LegacyDeductScript string

// LegacyDeductLocalScript is the seeds' deduct as their services carry it: through locals,
// and a missing stock key read as 0, so 0 (sold out) for no such item.
//
//go:embed lua/seeds_deduct_local.lua
var LegacyDeductLocalScript string

// legacyScripts recognises the built-in and configured scripts, and learns the SHA1 of each
// copy it sees (a service's copy may differ in comments and whitespace, and so in SHA1), and
// of each script loaded that it does not recognise, so that its EVALSHA on a legacy key gets
// the refusal its EVAL would. Safe for concurrent use.
type legacyScripts struct {
	byCanon map[string]*legacyScript
	mu      sync.RWMutex
	bySHA   map[string]*legacyScript // nil value: loaded, and not a legacy stock script
	// prefixes are the scripts' KEYS[1] prefixes, for a quick look at every command.
	prefixes []string
	// learned counts the SHA1s learned from copies seen, and unknown those of scripts that
	// are not stock scripts (guarded by mu): each is bounded apart, so that a client loading
	// junk cannot keep the copies a service runs from being learned.
	learned, unknown int
}

// maxLearnedSHAs bounds the SHA1s learned from the copies clients send, and apart those of
// the scripts they load that are not stock scripts; past it a copy is still recognised by its
// body, and an EVALSHA of it gets NOSCRIPT, then EVAL.
const maxLearnedSHAs = 1024

// newLegacyScripts knows the seeds' scripts and extra (conf's buy.legacy, validated).
func newLegacyScripts(extra []conf.LegacyScript) *legacyScripts {
	l := &legacyScripts{byCanon: map[string]*legacyScript{}, bySHA: map[string]*legacyScript{}}
	l.add(LegacyBuyScript, "", &legacyScript{name: "seeds' buy", keys: 2, uidArg: 1, qtyArg: 2, prefix: LegacyStockPrefix,
		replies: guard.IntReplies{Success: 1, SoldOut: 0, Duplicate: -1, NoSale: 0}})
	l.add(LegacyDeductScript, "", &legacyScript{name: "seeds' deduct", keys: 1, qtyArg: 1, prefix: LegacyStockPrefix,
		replies: guard.IntReplies{Success: 1, SoldOut: 0, Duplicate: -1, NoSale: -1}})
	l.add(LegacyDeductLocalScript, "", &legacyScript{name: "seeds' deduct", keys: 1, qtyArg: 1, prefix: LegacyStockPrefix,
		replies: guard.IntReplies{Success: 1, SoldOut: 0, Duplicate: -1, NoSale: 0}})
	for _, c := range extra {
		prefix, suffix, _ := strings.Cut(c.StockKey, "{sku}")
		name := c.Name
		if name == "" {
			name = "configured"
		}
		l.add(c.Body, c.SHA1, &legacyScript{name: name, keys: c.Keys, uidArg: c.UIDArg, qtyArg: c.QtyArg, prefix: prefix, suffix: suffix,
			replies: guard.IntReplies{Success: c.Replies.Success, SoldOut: c.Replies.SoldOut, Duplicate: c.Replies.Duplicate, NoSale: c.Replies.NoSale}})
	}
	return l
}

// add knows ls by body (when given) and by sha (given, or the body's). A body that is not
// Lua's tokens (conf validates configured ones) is known by its SHA1 alone.
func (l *legacyScripts) add(body, sha string, ls *legacyScript) {
	if body != "" {
		if c, err := luacanon.Canonical(body); err == nil {
			l.byCanon[c] = ls
		}
		sha = sha1Hex(body)
	}
	l.bySHA[strings.ToLower(sha)] = ls
	if !slices.Contains(l.prefixes, ls.prefix) {
		l.prefixes = append(l.prefixes, ls.prefix)
	}
}

func sha1Hex(body string) string {
	sum := sha1.Sum([]byte(body))
	return hex.EncodeToString(sum[:])
}

// byBody recognises a body, and remembers its SHA1, recognised or not, for the EVALSHAs that
// follow.
func (l *legacyScripts) byBody(body []byte) *legacyScript {
	sha := sha1Hex(string(body))
	if ls, seen := l.bySHAOf(sha); seen {
		return ls
	}
	var ls *legacyScript
	if c, err := luacanon.Canonical(string(body)); err == nil {
		ls = l.byCanon[c]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	count := &l.learned
	if ls == nil {
		count = &l.unknown
	}
	if _, seen := l.bySHA[sha]; !seen && *count < maxLearnedSHAs { // endless variants: memory stays bounded
		l.bySHA[sha] = ls
		*count++
	}
	return ls
}

// bySHAOf is the script whose SHA1 is sha; seen says whether the SHA1 is known at all (a
// script loaded, or run, that is not a legacy stock script: seen, and ls nil).
func (l *legacyScripts) bySHAOf(sha string) (ls *legacyScript, seen bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	ls, seen = l.bySHA[strings.ToLower(sha)]
	return ls, seen
}

var (
	errLegacyUnknown = errors.New("NOPERM a script on " + LegacyStockPrefix + "<sku> that seckill-proxy does not recognise as a legacy stock script (buy.legacy) is refused: the stock belongs to SECKILL.WARM")
	//lint:ignore ST1005 Redis's own NOSCRIPT reply, byte for byte: clients match it to fall back to EVAL
	errLegacyNoSHA   = errors.New("NOSCRIPT No matching script. Please use EVAL.")
	errLegacyUIDLess = errors.New("NOPERM the seeds' deduct script names no buyer, so one order per buyer, LIMIT, the deny list and the buyer's attempts could not hold: it is off (buy.legacy_uidless); send the seeds' buy script or SECKILL.BUY")
	errLegacyInMulti = errors.New("NOPERM a legacy stock script, or a command on the seeds' keys, is refused inside MULTI by seckill-proxy: a buy runs outside transactions; EXEC will answer EXECABORT")
)

// isLegacyCall says whether args may be a legacy stock script's call: EVAL or EVALSHA whose
// first key starts as a legacy stock key does. Cheap: the event loop asks it of every command.
func (l *legacyScripts) isLegacyCall(args [][]byte) bool {
	if len(args) < 4 || (len(args[0]) != 4 && len(args[0]) != 7) || (args[0][0]|0x20) != 'e' {
		return false
	}
	if !bytes.EqualFold(args[0], []byte("eval")) && !bytes.EqualFold(args[0], []byte("evalsha")) {
		return false
	}
	for _, p := range l.prefixes {
		if strings.HasPrefix(string(args[3]), p) {
			return true
		}
	}
	return false
}

// legacyBuy reads a legacy stock script's call as a buy, by user. ok false: args is not one
// (it goes on as any other command). err set: it is one, and is refused with err. A script
// with no buyer (buy.legacy_uidless) buys as a new buyer each call, admitted as user.
func (r *Router) legacyBuy(args [][]byte, user string) (req guard.BuyRequest, err error, ok bool) {
	if r.legacy == nil || !r.legacy.isLegacyCall(args) {
		return req, nil, false
	}
	var ls *legacyScript
	if strings.EqualFold(string(args[0]), "evalsha") {
		var seen bool
		if ls, seen = r.legacy.bySHAOf(string(args[1])); !seen {
			// Unknown here (a copy loaded through another proxy, or before a restart): the
			// client sends its body again, by which it is recognised.
			return req, errLegacyNoSHA, true
		} else if ls == nil {
			return req, errLegacyUnknown, true
		}
	} else if ls = r.legacy.byBody(args[1]); ls == nil {
		return req, errLegacyUnknown, true
	}
	if ls.uidArg == 0 && !r.opt.LegacyUIDLess {
		return req, errLegacyUIDLess, true
	}
	n, okN := sale.ParseCount(args[2])
	if !okN || int(n) != ls.keys || len(args) < 3+ls.keys+max(ls.uidArg, ls.qtyArg) {
		return req, errors.New("ERR wrong number of keys or arguments for the " + ls.name + " legacy stock script"), true
	}
	argv := args[3+ls.keys:]
	key := string(args[3])
	if !strings.HasPrefix(key, ls.prefix) || !strings.HasSuffix(key, ls.suffix) || len(key) < len(ls.prefix)+len(ls.suffix) {
		return req, errors.New("ERR the " + ls.name + " legacy stock script's first key must be " + ls.prefix + "<sku>" + ls.suffix), true
	}
	sku := []byte(key[len(ls.prefix) : len(key)-len(ls.suffix)])
	uid := []byte("legacy-" + xid.New().String()) // a new buyer per call, with no buyer argument
	if ls.uidArg > 0 {
		uid = argv[ls.uidArg-1]
	}
	sk, u, perr := guard.ParseSKUUID(sku, uid)
	if perr != nil {
		return req, perr, true
	}
	qty, okQ := sale.ParseCount(argv[ls.qtyArg-1])
	if !okQ || qty > sale.MaxLimit {
		return req, errors.New("ERR the legacy stock script's quantity must be an integer from 1 up"), true
	}
	req = guard.BuyRequest{SKU: sk, UID: u, Qty: qty, Ints: &ls.replies}
	if ls.uidArg == 0 {
		req.Admit = user
	}
	return req, nil, true
}

// learnLegacy remembers the SHA1 of a SCRIPT LOAD's body that is a legacy stock script, so
// that the EVALSHAs that follow are recognised. The load itself goes on to Redis, which
// answers that same SHA1.
func (r *Router) learnLegacy(args [][]byte) {
	if r.legacy != nil && len(args) == 3 && strings.EqualFold(string(args[0]), "script") && strings.EqualFold(string(args[1]), "load") {
		r.legacy.byBody(args[2])
	}
}

// intReply maps a legacy buy's outcome to its script's integers.
func intReply(ints *guard.IntReplies, res guard.BuyResult) (int64, bool) {
	var dup *guard.DuplicateError
	switch {
	case res.Err == nil:
		return ints.Success, true
	case errors.Is(res.Err, guard.ErrSoldOut):
		// Not a LIMITED answer: the seeds' SeckillManager takes a 0 as sold out for good, and
		// would stop selling; a limited legacy buy gets the LIMITED error, as a failed call.
		return ints.SoldOut, true
	case errors.As(res.Err, &dup):
		return ints.Duplicate, true
	case errors.Is(res.Err, guard.ErrClosed):
		return ints.NoSale, true
	}
	return 0, false
}

// serveLegacy takes what of a pipeline is the seeds' legacy client code: a legacy stock script
// inside MULTI (the transaction is refused), a legacy stock script call (gathered as a buy),
// and SCRIPT LOAD of a script it may recognise later. It reports whether it took args.
func (r *Router) serveLegacy(b *batch, args [][]byte) bool {
	s := b.s
	if s.inTx() && r.inMultiLegacy(args) {
		b.flush()
		s.tx.Abort()
		WriteError(b.w, errLegacyInMulti)
		return true
	}
	if req, lerr, ok := r.checkedLegacyBuy(s, args); ok {
		b.addBuy(req, lerr)
		return true
	}
	r.learnLegacy(args)
	return false
}

// buyCheckArgs stand for a legacy buy in the router's checks: it may run where SECKILL.BUY
// may (logged in, a role that buys), whatever the policy says of scripts.
var buyCheckArgs = [][]byte{[]byte("seckill.buy"), []byte("sku"), []byte("uid")}

// checkedLegacyBuy is legacyBuy after the checks a SECKILL.BUY gets, and, for a script with
// no buyer, the connection's cap (buy.legacy_uidless_per_conn).
func (r *Router) checkedLegacyBuy(s *Session, args [][]byte) (req guard.BuyRequest, err error, ok bool) {
	if r.legacy == nil || !r.legacy.isLegacyCall(args) || s.inTx() {
		return req, nil, false
	}
	cl := r.Identify(buyCheckArgs)
	if _, _, err := r.check(s, &cl, buyCheckArgs); err != nil {
		return req, err, true
	}
	req, err, ok = r.legacyBuy(args, s.User)
	if err == nil && req.Admit != "" {
		if s.uidLessCalls >= r.opt.LegacyUIDLessPerConn {
			return req, guard.NewLimited(guard.LimitedBuyer, -1), true
		}
		s.uidLessCalls++
	}
	return req, err, ok
}

// inMultiLegacy says whether args, queued inside MULTI, would be a legacy stock script or a
// command on the seeds' keys: neither runs in a transaction (a buy is not a Redis command),
// so the transaction is refused as a whole.
func (r *Router) inMultiLegacy(args [][]byte) bool {
	return r.legacy != nil && (r.legacy.isLegacyCall(args) || r.isLegacyKeyCommand(args))
}

// errLegacyStockWrite refuses a write of the seeds' stock key: the very write that sold 2,053
// phones of 2,000.
var errLegacyStockWrite = errors.New("NOPERM " + LegacyStockPrefix + "<sku> is the sale's stock, which only SECKILL.WARM sets (it checks Redis against MySQL's stock); a number written here would oversell")

// legacyKeyOf says which of the seeds' keys args names first, and its SKU.
func legacyKeyOf(args [][]byte) (prefix, sku string) {
	if len(args) < 2 || len(args[1]) < len("seckill:") || string(args[1][:len("seckill:")]) != "seckill:" {
		return "", ""
	}
	key := string(args[1])
	for _, p := range sale.LegacyPrefixes {
		if strings.HasPrefix(key, p) {
			return p, key[len(p):]
		}
	}
	return "", ""
}

// isLegacyKeyCommand says whether args is a command on the seeds' keys that the proxy
// answers itself (legacyKeyCommand): the event loop does not forward it.
func (r *Router) isLegacyKeyCommand(args [][]byte) bool {
	if r.legacy == nil {
		return false
	}
	prefix, _ := legacyKeyOf(args)
	switch prefix {
	case LegacyStockPrefix:
		return true
	case sale.LegacySoldOutPrefix:
		return strings.EqualFold(string(args[0]), "get")
	case sale.LegacyBuyersPrefix, sale.LegacyUsersPrefix:
		name := strings.ToLower(string(args[0]))
		return name == "hexists" || name == "hget"
	}
	return false
}

// legacyKeyCommand answers a command on the seeds' keys from the sale: GET of the stock (the
// remaining stock) and of the sold-out marker (1 or 0), HEXISTS and HGET of the buyers; any
// other command on the stock key is refused. ok false: not such a command.
func (r *Router) legacyKeyCommand(ctx context.Context, args [][]byte) (reply Reply, err error, ok bool) {
	if !r.isLegacyKeyCommand(args) {
		return nil, nil, false
	}
	prefix, sku := legacyKeyOf(args)
	name := strings.ToLower(string(args[0]))
	if !sale.ValidID([]byte(sku)) {
		return NullBulk{}, nil, true
	}
	switch {
	case prefix == LegacyStockPrefix && name == "get" && len(args) == 2, prefix == sale.LegacySoldOutPrefix && len(args) == 2:
		stock, exists, err := r.guard.LegacyStock(ctx, sku)
		switch {
		case err != nil:
			return nil, err, true
		case !exists:
			return NullBulk{}, nil, true
		case prefix == sale.LegacySoldOutPrefix && stock <= 0:
			return BulkString("1"), nil, true
		case prefix == sale.LegacySoldOutPrefix:
			return BulkString("0"), nil, true
		}
		return BulkString(strconv.FormatInt(stock, 10)), nil, true
	case prefix == LegacyStockPrefix && r.opt.Upstream != nil && r.opt.Upstream.ReadOnly(ctx, args):
		return nil, errors.New("ERR " + LegacyStockPrefix + "<sku> is answered from the sale by seckill-proxy for GET only (the remaining stock); '" + name + "' of it is not supported"), true
	case prefix == LegacyStockPrefix:
		return nil, errLegacyStockWrite, true
	case len(args) == 3:
		has, err := r.guard.HasBuyer(ctx, sku, string(args[2]))
		switch {
		case err != nil:
			return nil, err, true
		case name == "hexists" && has:
			return Int(1), nil, true
		case name == "hexists":
			return Int(0), nil, true
		case has:
			return BulkString("1"), nil, true
		}
		return NullBulk{}, nil, true
	}
	return nil, errors.New("ERR wrong number of arguments for '" + name + "' command"), true
}
