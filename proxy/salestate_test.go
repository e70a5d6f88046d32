package proxy

import (
	"testing"

	"seckill-proxy/guard"
	"seckill-proxy/sale"
)

// TestPageState: the page's word for a sale follows Redis's state, its stock and what is still
// to be stored.
func TestPageState(t *testing.T) {
	for _, c := range []struct {
		m    guard.SaleMetrics
		want string
	}{
		{guard.SaleMetrics{State: sale.StateOpen, Stock: 5}, "open"},
		{guard.SaleMetrics{State: sale.StateOpen, Stock: 0, Pending: 9}, "sold out"},
		{guard.SaleMetrics{State: sale.StateClosed, Pending: 3}, "draining"},
		{guard.SaleMetrics{State: sale.StateClosed, Outbox: 1}, "draining"},
		{guard.SaleMetrics{State: sale.StateClosed}, "over"},
		{guard.SaleMetrics{State: sale.StateWarming, Stock: 5}, "warming"},
	} {
		if got := pageState(c.m); got != c.want {
			t.Errorf("%+v: %q, want %q", c.m, got, c.want)
		}
	}
}
