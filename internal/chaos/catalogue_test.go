package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestCatalogue: every fault has a name of its own and says what it does; every network
// fault's kind is one NetworkFault knows, on a link of Links.
func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Catalogue() {
		if seen[f.Name] || f.Doc == "" || strings.Contains(f.Doc, "on the  link") {
			t.Errorf("%q: seen before %v, doc %q", f.Name, seen[f.Name], f.Doc)
		}
		seen[f.Name] = true
		if f.Kind == Network {
			link, kind, _ := strings.Cut(f.Name, "-")
			if _, err := FaultOf(kind); err != nil || !strings.Contains(strings.Join(Links, " "), link) {
				t.Errorf("%s: link %q, kind %q: %v", f.Name, link, kind, err)
			}
		}
	}
	if got := DuringSale.String() + " " + Network.String() + " " + OwnRun.String(); got != "sale network own" {
		t.Errorf("kinds read %q, which scripts/chaos.sh does not know", got)
	}
	if len(seen) != 17+3*5+2 {
		t.Errorf("%d faults, want 34", len(seen))
	}
	for name, n := range crowdSales {
		if f, ok := Lookup(name); !ok || f.Crowd() != n || f.Kind != DuringSale {
			t.Errorf("crowd of %s: in the catalogue %v, %d others, want %d during a sale", name, ok, f.Crowd(), n)
		}
	}
	for name, k := range splitSales {
		if f, ok := Lookup(name); !ok || f.SaleBuckets() != k || f.Kind != DuringSale {
			t.Errorf("split sale of %s: in the catalogue %v, buckets %d, want %d during a sale", name, ok, f.SaleBuckets(), k)
		}
	}
	if f, _ := Lookup("master-kill"); f.SaleBuckets() != 1 {
		t.Errorf("master-kill's sale has %d buckets, want 1", f.SaleBuckets())
	}
}

// TestPlan: the faults named, in that order, each with the runs given unless its
// CHAOS_RUNS_<FAULT> says otherwise; none named is every fault; a name or a count the suite
// does not know is an error that says what it knows.
func TestPlan(t *testing.T) {
	env := map[string]string{"CHAOS_RUNS_MASTER_KILL": "10", "CHAOS_RUNS_REDIS_CUT": "0"}
	plan, err := Plan([]string{"redis-cut", "master-kill", "proxy-kill"}, 2, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range plan {
		got = append(got, fmt.Sprintf("%s:%d", s.Fault.Name, s.Runs))
	}
	if strings.Join(got, " ") != "redis-cut:0 master-kill:10 proxy-kill:2" {
		t.Errorf("plan %v", got)
	}
	all, err := Plan(nil, 1, func(string) string { return "" })
	if err != nil || len(all) != len(Catalogue()) || all[0].Fault.Name != "proxy-kill" || all[len(all)-1].Fault.Name != "admission-rush" {
		t.Errorf("the whole plan: %d steps (%v)", len(all), err)
	}
	if _, err := Plan([]string{"proxy-kil"}, 1, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "proxy-kill") {
		t.Errorf("a misspelt fault: %v, want an error listing the faults", err)
	}
	if _, err := Plan([]string{"proxy-kill"}, 1, func(string) string { return "three" }); err == nil || !strings.Contains(err.Error(), "CHAOS_RUNS_PROXY_KILL") {
		t.Errorf("a bad count: %v, want an error naming the variable", err)
	}
	if _, err := Plan(nil, -1, func(string) string { return "" }); err == nil {
		t.Error("negative runs accepted")
	}
}

// TestInjectAt: the fault comes 300 ms into the load at the earliest, and before 60% of the
// time the units take to sell, plus those 300 ms; a sale with no rate gets the earliest.
func TestInjectAt(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	span := 2000 * time.Second / 500
	lo, hi := time.Hour, time.Duration(0)
	for range 10000 {
		d := InjectAt(2000, 500, r)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 300*time.Millisecond || hi >= 300*time.Millisecond+span*6/10 || hi-lo < span/2 {
		t.Errorf("moments from %v to %v, want spread over [300ms, %v)", lo, hi, 300*time.Millisecond+span*6/10)
	}
	if d := InjectAt(2000, 0, r); d != 300*time.Millisecond {
		t.Errorf("no rate: %v", d)
	}
}
