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
