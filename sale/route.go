package sale

import (
	"strconv"
	"strings"
)

// Route is where a sale's orders go, as every proxy that sells it must agree: the Kafka topic
// and the order message version. WARM records the warming proxy's route in the sale's meta
// (field "route"); the buy and release scripts refuse a proxy whose route differs, so that a
// proxy configured for another topic never tells a buyer "bought" for an order that no sink
// reads. It renders as "topic=<topic> schema=<version>" (a Kafka topic name has no spaces).
func Route(topic string) string {
	return "topic=" + topic + " schema=" + strconv.Itoa(MessageVersion)
}

// SplitRoute is the route WARM records for a sale split into stock buckets: route with
// " buckets=1", so that a proxy of a version that knows no buckets (and would check a buyer
// in one bucket only) finds another route than its own and sells nothing (DRIFT).
func SplitRoute(route string) string { return route + " buckets=1" }

// RouteAccepts says whether a proxy whose route is mine may sell, sweep and release a sale
// whose recorded route is sale: the same route, the same for a split sale, or none (a sale
// warmed before routes were recorded).
func RouteAccepts(sale, mine string) bool {
	return sale == "" || sale == mine || sale == SplitRoute(mine)
}

// RouteDiff names what differs between the sale's route and this proxy's, for an error or a
// CHECK line: "topic orders (this proxy: other)"; "" when they agree.
func RouteDiff(sale, mine string) string {
	if sale == mine {
		return ""
	}
	a, b := routeFields(sale), routeFields(mine)
	var out []string
	for _, k := range []string{"topic", "schema"} {
		if a[k] != b[k] {
			out = append(out, k+" "+strconv.Quote(a[k])+" (this proxy: "+strconv.Quote(b[k])+")")
		}
	}
	if len(out) == 0 {
		return "route " + strconv.Quote(sale) + " (this proxy: " + strconv.Quote(mine) + ")"
	}
	return strings.Join(out, ", ")
}

func routeFields(r string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(r) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}
