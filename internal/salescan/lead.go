package salescan

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/sale"
)

//go:embed lua/lead.lua
var leadLua string

var leadScript = redis.NewScript(leadLua)

// The leases of the work done once per cluster. They are under the sales' prefix, so no
// pass-through client may take one, and "!" is in no SKU, so no sale's keys can meet them.
const leadPrefix = sale.SaleKeyPrefix + "!lead}:"

// SweepLeadKey is the lease of the sweeper of the sales whose orders go to route: proxies on
// other topics sweep theirs under their own.
func SweepLeadKey(route string) string { return leadPrefix + "sweep:" + route }

// LateLeadKey is the lease of the late-order watch.
const LateLeadKey = leadPrefix + "late"

// Lead takes or renews the lease key for instance, for ttl: true while instance holds it. A
// holder that stops renewing (killed, paused, cut off) loses it after ttl, and the next
// caller takes it.
func Lead(ctx context.Context, rc redis.Scripter, key, instance string, ttl time.Duration) (bool, error) {
	n, err := leadScript.Run(ctx, rc, []string{key}, instance, ttl.Milliseconds()).Int()
	return n == 1, err
}
