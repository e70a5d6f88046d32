package salescan

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/internal/testenv"
	"seckill-proxy/sale"
)

// TestLeadWhileSales: with no sale in the keyspace, no lease is taken (no key exists because a
// proxy runs); with one, the lease is taken and renewed; once the last sale is gone, the
// holder gives its lease up. On a database of its own of the plain Redis server, whose set of
// sales no other test touches.
func TestLeadWhileSales(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: testenv.Standalone(t), DB: 9})
	t.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	key := SweepLeadKey("lead-test")
	t.Cleanup(func() { rc.Del(context.Background(), key, sale.SalesKey) })
	rc.Del(ctx, key, sale.SalesKey)
	lead := func(held bool) bool {
		t.Helper()
		ok, err := LeadWhileSales(ctx, rc, key, "me", 10*time.Second, held)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	exists := func() bool { return rc.Exists(ctx, key).Val() == 1 }
	if lead(false) || exists() {
		t.Fatal("no sale: the lease was taken")
	}
	if err := rc.SAdd(ctx, sale.SalesKey, "phone").Err(); err != nil {
		t.Fatal(err)
	}
	if !lead(false) || !lead(true) || !exists() {
		t.Fatal("a sale: the lease was not taken and renewed")
	}
	if err := rc.Del(ctx, sale.SalesKey).Err(); err != nil {
		t.Fatal(err)
	}
	if lead(true) || exists() {
		t.Fatal("the last sale gone: the lease was kept")
	}
}
