package proxy_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"seckill-proxy/internal/testenv"
)

// TestProxyClockOff: a proxy whose clock is 5 s off Redis's, ahead and behind (its
// redis-server runs under datefudge, 5 s behind or ahead of this machine's clock), opens and
// ends a sale's window by Redis's clock, never its own; the orders reach MySQL as ever.
func TestProxyClockOff(t *testing.T) {
	datefudge := testenv.Command(t, "datefudge")
	for _, ahead := range []time.Duration{5 * time.Second, -5 * time.Second} {
		t.Run("proxy "+ahead.String()+" ahead", func(t *testing.T) {
			addr, startRedis := ownRedisUnder(t, func() []string {
				return []string{datefudge, time.Now().Add(-ahead).UTC().Format("2006-01-02 15:04:05.000000 UTC")}
			})
			startRedis()
			s := startOn(t, addr, nil)
			runSink(t, s.cfg)
			ctx := context.Background()
			c := s.client(t, 1)
			t0 := time.Now()
			redisNow, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			skew := t0.Add(time.Since(t0) / 2).Sub(redisNow) // how far the proxy's clock is ahead
			if (skew - ahead).Abs() > 500*time.Millisecond {
				t.Fatalf("the proxy's clock is %v ahead of Redis's, want %v: datefudge did not take", skew, ahead)
			}

			// A window that opens in 1 s and lasts 1 s: open and end are those moments by the
			// proxy's clock; START and END are given as Redis's clock reads them then. A proxy
			// that judged them by its own clock would open and end the sale 5 s off.
			open := time.Now().Add(time.Second)
			end := open.Add(time.Second)
			sku := newSKU("clock")
			s.sale(t, c, sku, 1000, "START", open.Add(-skew).UnixMilli(), "END", end.Add(-skew).UnixMilli())
			var firstOrder, ended time.Time
			orders := 0
			eventually(t, 15*time.Second, "the sale to open and end", func() bool {
				err := c.Do(ctx, "seckill.buy", sku, "u"+strconv.Itoa(orders)+"_"+strconv.FormatInt(time.Now().UnixNano(), 36)).Err()
				now := time.Now()
				switch {
				case err == nil:
					orders++
					if firstOrder.IsZero() {
						firstOrder = now
					}
				case err.Error() == "CLOSED not started":
					if !firstOrder.IsZero() {
						t.Fatal("CLOSED not started after an order")
					}
				case err.Error() == "CLOSED ended":
					ended = now
					return true
				default:
					t.Fatalf("buy: %v", err)
				}
				return false
			})
			if firstOrder.IsZero() {
				t.Fatal("no order between START and END")
			}
			// By the proxy's own clock, the window would be ahead earlier or later: the first
			// order and the end come at Redis's START and END, within a poll's slack.
			if d := firstOrder.Sub(open); d < -50*time.Millisecond || d > 250*time.Millisecond {
				t.Errorf("the first order came %v after START by Redis's clock", d)
			}
			if d := ended.Sub(end); d < -50*time.Millisecond || d > 250*time.Millisecond {
				t.Errorf("the sale ended %v after END by Redis's clock", d)
			}
			t.Logf("first order %v after START, ended %v after END (Redis's clock); %d orders", firstOrder.Sub(open).Round(time.Millisecond),
				ended.Sub(end).Round(time.Millisecond), orders)
			s.waitConfirmed(t, sku, orders, 30*time.Second)
		})
	}
}
