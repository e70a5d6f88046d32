package chaos

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// The fault suite's catalogue: every fault scripts/chaos.sh knows, in the order it runs them,
// with what each does. The script asks for its plan (Plan, through `seckill-bench
// fault-plan`) and does what starts and stops processes; what a fault means is here.

// Kind says how a fault is run.
type Kind int

const (
	// DuringSale: injected during a sale through two proxies and two sinks (chaos.sh inject).
	DuringSale Kind = iota
	// Network: a toxiproxy fault on every link of one kind (Redis, Kafka or MySQL), during a sale.
	Network
	// OwnRun: a run of its own, not a sale of the suite's (the clock test, the admission bench).
	OwnRun
)

// String is the kind as scripts/chaos.sh reads it from the plan: sale, network or own.
func (k Kind) String() string {
	switch k {
	case DuringSale:
		return "sale"
	case Network:
		return "network"
	case OwnRun:
		return "own"
	}
	return "unknown"
}

// Fault is one fault of the suite.
type Fault struct {
	Name string
	Kind Kind
	Doc  string
}

// splitSales are the faults whose sale is split into stock buckets, with their BUCKETS.
var splitSales = map[string]int{"bucket-master-kill": 3, "bucket-sink-kill": 3}

// SaleBuckets is the BUCKETS the fault's sale is warmed with: 1 unless the fault's sale is
// split.
func (f Fault) SaleBuckets() int { return max(1, splitSales[f.Name]) }

// crowdSales are the faults whose sale is one among many open ones, with how many others.
var crowdSales = map[string]int{"crowd-proxy-kill": 1000, "crowd-master-kill": 1000}

// Crowd is how many other sales are warmed and left open, idle, beside the fault's sale.
func (f Fault) Crowd() int { return crowdSales[f.Name] }

// Links are the links a network fault may be put on.
var Links = []string{"redis", "kafka", "mysql"}

var saleFaults = []Fault{
	{"proxy-kill", DuringSale, "one proxy killed -9, restarted 1 s later"},
	{"sink-kill", DuringSale, "one sink killed -9, restarted 1 s later"},
	{"kafka-stop", DuringSale, "Kafka stopped for 5 s (scripts/devstack.sh stop kafka), then started"},
	{"mysql-stop", DuringSale, "MariaDB stopped for 5 s, then started"},
	{"master-kill", DuringSale, "the Redis master that owns the SKU killed -9; once the cluster has failed over, the node is started again and rejoins as a replica"},
	{"master-pause", DuringSale, "the Redis master that owns the SKU stopped (SIGSTOP, as a VM freeze or a stalled fork) past the node timeout, until its replica has taken over and 5 s in all, then resumed (SIGCONT): it wakes believing it is master, runs the scripts queued in its socket, and rejoins as a replica"},
	{"master-partition", DuringSale, "the Redis master that owns the SKU cut off from its replica and the other nodes (cluster bus and replication, both ways: scripts/devstack.sh partition) while both proxies still reach it, until its replica has taken over and 5 s in all, then healed: for a node timeout it takes writes no replica copies, then answers CLUSTERDOWN, and it rejoins as a replica, its unreplicated writes dropped"},
	{"proxy-pause", DuringSale, "one proxy stopped (SIGSTOP) for 5 s, then resumed"},
	{"overload", DuringSale, "the sale driven flat out (no request rate, 20,000 requests on 200 connections through both proxies) while a shell loop keeps a core busy from its start: no fault, so a single UNAVAILABLE fails the run"},
	{"operator-set", DuringSale, "an operator's SET of the SKU's stock on Redis directly, 50 units above it"},
	{"kafka-and-proxy", DuringSale, "Kafka stopped and a proxy killed -9 at once, both healed"},
	{"topic-drift", DuringSale, "one proxy restarted with another kafka.topic for 5 s, then with the sale's: while drifted it must sell nothing (-DRIFT), and every order a buyer was told of must still reach MySQL"},
	{"sink-mysql-down", DuringSale, "MariaDB stopped, both sinks killed -9 and started again while it is down (they must wait, not exit), MariaDB started 5 s later: the sinks drain"},
	{"bucket-master-kill", DuringSale, "a sale split into 3 stock buckets: the Redis master that owns its second bucket killed -9, then back as a replica (as master-kill)"},
	{"crowd-proxy-kill", DuringSale, "as proxy-kill, the sale one of 1,001 open sales (1,000 others warmed through the proxies and left idle): the sweeper must find the killed proxy's orders among them"},
	{"crowd-master-kill", DuringSale, "as master-kill, the sale one of 1,001 open sales (1,000 others warmed and left idle, a third of them on the killed master)"},
	{"bucket-sink-kill", DuringSale, "a sale split into 3 stock buckets: one sink killed -9 mid-drain, restarted 1 s later"},
}

var ownRuns = []Fault{
	{"clock-off", OwnRun, "a proxy whose clock is 5 s ahead of Redis's, then 5 s behind (the proxy's TestProxyClockOff, whose redis-server runs under datefudge): a sale window must open and end by Redis's clock"},
	{"admission-rush", OwnRun, "ADMISSION_SPLIT=1 scripts/bench-admission.sh 500 50 400000 100: two proxies on one sale's RATE 500 BURST 50, each driven flat out by a load process of its own; passes when they deliver at least 95% of the rate (burst aside), no reply but an order or LIMITED, and at least 125 orders in every 500 ms after the first"},
}

// networkDocs say what each kind of network fault does to a link, for the catalogue.
var networkDocs = map[string]string{
	"cut":   "the link cut: toxiproxy's proxy disabled (connections dropped, new ones refused)",
	"slow":  "200 ms added to every reply (latency toxic, downstream)",
	"hang":  "connections accept but nothing comes back, nor goes through (timeout toxic, timeout 0, both ways)",
	"stall": "the service stops reading: requests pile up in the buffers until the fault heals (bandwidth toxic at rate 0, upstream)",
	"reset": "every connection closed 4 KiB into its replies, with a TCP reset (limit_data and reset_peer toxics, downstream)",
}

// Catalogue is every fault, in the suite's order: those during a sale, the network faults
// (LINK-KIND for each link and kind), then the runs of their own.
func Catalogue() []Fault {
	all := append([]Fault(nil), saleFaults...)
	for _, link := range Links {
		for _, kind := range []string{"cut", "slow", "hang", "stall", "reset"} {
			all = append(all, Fault{Name: link + "-" + kind, Kind: Network, Doc: "on the " + link + " link: " + networkDocs[kind]})
		}
	}
	return append(all, ownRuns...)
}

// Lookup finds a fault by name.
func Lookup(name string) (Fault, bool) {
	for _, f := range Catalogue() {
		if f.Name == name {
			return f, true
		}
	}
	return Fault{}, false
}

// Step is one fault of a plan, and how many runs of it.
type Step struct {
	Fault Fault
	Runs  int
}

// Plan is the suite's plan: the faults named (all of them when none is), each with runs runs,
// unless the environment's CHAOS_RUNS_<FAULT> (its name in capitals, _ for -) says otherwise.
func Plan(names []string, runs int, getenv func(string) string) ([]Step, error) {
	if runs < 0 {
		return nil, fmt.Errorf("runs %d: want 0 or more", runs)
	}
	var faults []Fault
	if len(names) == 0 {
		faults = Catalogue()
	}
	for _, n := range names {
		f, ok := Lookup(n)
		if !ok {
			var all []string
			for _, f := range Catalogue() {
				all = append(all, f.Name)
			}
			return nil, fmt.Errorf("unknown fault %q (one of: %s)", n, strings.Join(all, " "))
		}
		faults = append(faults, f)
	}
	plan := make([]Step, 0, len(faults))
	for _, f := range faults {
		s := Step{Fault: f, Runs: runs}
		v := RunsVar(f.Name)
		if raw := getenv(v); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%s=%q: want a count of runs", v, raw)
			}
			s.Runs = n
		}
		plan = append(plan, s)
	}
	return plan, nil
}

// RunsVar is the environment variable that sets the runs of one fault.
func RunsVar(fault string) string {
	return "CHAOS_RUNS_" + strings.ToUpper(strings.ReplaceAll(fault, "-", "_"))
}

// InjectAt is a random moment to inject a fault while a sale's units still sell, the load
// starting at time 0: units at rate requests a second sell over units/rate seconds (at most),
// and the fault comes between 300 ms in and 60% of that span later.
func InjectAt(units, rate int, r *rand.Rand) time.Duration {
	if units <= 0 || rate <= 0 {
		return 300 * time.Millisecond
	}
	span := time.Duration(units) * time.Second / time.Duration(rate)
	window := span * 6 / 10
	if window <= 0 {
		return 300 * time.Millisecond
	}
	return 300*time.Millisecond + time.Duration(r.Int64N(int64(window)))
}
