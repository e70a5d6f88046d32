package salescan

import (
	"context"
	_ "embed"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/sale"
)

//go:embed lua/lead.lua
var leadLua string

//go:embed lua/unlead.lua
var unleadLua string

var (
	leadScript   = redis.NewScript(leadLua)
	unleadScript = redis.NewScript(unleadLua)
)

// The leases of the work done once per cluster. They are under the sales' prefix, so no
// pass-through client may take one, and "!" is in no SKU, so no sale's keys can meet them.
const leadPrefix = sale.SaleKeyPrefix + "!lead}:"

// SweepLeadKey is the lease of the sweeper of the sales whose orders go to route: proxies on
// other topics sweep theirs under their own.
func SweepLeadKey(route string) string { return leadPrefix + "sweep:" + route }

// LateLeadKey is the lease of the late-order watch of the proxies whose outbox.late_after is
// lateAfter: a proxy with another setting watches with its own cadence and threshold, under
// a lease of its own, rather than waiting on a leader that looks less often.
func LateLeadKey(lateAfter time.Duration) string {
	return leadPrefix + "late:" + strconv.FormatInt(lateAfter.Milliseconds(), 10)
}

// Lead takes or renews the lease key for instance, for ttl: true while instance holds it. A
// holder that stops renewing (killed, paused, cut off) loses it after ttl, and the next
// caller takes it.
func Lead(ctx context.Context, rc redis.Scripter, key, instance string, ttl time.Duration) (bool, error) {
	n, err := leadScript.Run(ctx, rc, []string{key}, instance, ttl.Milliseconds()).Int()
	return n == 1, err
}

// LeadWhileSales is Lead while some sale exists (the set of sales, sale.SalesKey): with
// none, the work has nothing to do, and no lease is taken, so that no key is in the
// application's keyspace because a proxy runs; a lease the caller held at its last call
// (held) is given up.
func LeadWhileSales(ctx context.Context, rc redis.Cmdable, key, instance string, ttl time.Duration, held bool) (bool, error) {
	n, err := rc.Exists(ctx, sale.SalesKey).Result()
	if err != nil {
		return false, err
	}
	if n == 0 {
		if held {
			return false, Unlead(ctx, rc, key, instance)
		}
		return false, nil
	}
	ok, err := Lead(ctx, rc, key, instance, ttl)
	if !ok || err != nil {
		return ok, err
	}
	// The set of sales may have gone between the two calls (a FLUSHALL): then the lease just
	// taken is given up at once, rather than left in the keyspace until it expires.
	if n, err = rc.Exists(ctx, sale.SalesKey).Result(); err == nil && n == 0 {
		return false, Unlead(ctx, rc, key, instance)
	}
	return true, nil
}

// Unlead gives up the lease key if instance holds it (at shutdown: the next proxy takes over
// at once).
func Unlead(ctx context.Context, rc redis.Scripter, key, instance string) error {
	return unleadScript.Run(ctx, rc, []string{key}, instance).Err()
}
