package sale

import "testing"

func TestRouteDiff(t *testing.T) {
	a, b := Route("orders"), Route("other")
	if d := RouteDiff(a, a); d != "" {
		t.Fatalf("same route: %q", d)
	}
	if d, want := RouteDiff(a, b), `topic "orders" (this proxy: "other")`; d != want {
		t.Fatalf("RouteDiff = %q, want %q", d, want)
	}
	if d, want := RouteDiff("topic=orders schema=2", a), `schema "2" (this proxy: "1")`; d != want {
		t.Fatalf("RouteDiff = %q, want %q", d, want)
	}
	if d := RouteDiff("junk", a); d == "" {
		t.Fatal("an unreadable route must differ")
	}
}

// TestRouteAccepts: a proxy sells a sale of its own route, split or not, and one with no
// route; a split sale's route is not a proxy's own, so a proxy that knows no buckets (and
// compares the routes as they are) refuses it.
func TestRouteAccepts(t *testing.T) {
	mine := Route("orders")
	for _, c := range []struct {
		sale string
		ok   bool
	}{{mine, true}, {SplitRoute(mine), true}, {"", true}, {Route("other"), false}, {SplitRoute(Route("other")), false}, {mine + " buckets=2", false}} {
		if got := RouteAccepts(c.sale, mine); got != c.ok {
			t.Errorf("RouteAccepts(%q, %q) = %v, want %v", c.sale, mine, got, c.ok)
		}
	}
	if SplitRoute(mine) == mine {
		t.Fatal("a split sale's route is the proxy's own: a proxy that knows no buckets would sell it")
	}
}
