// Command seckill-bench runs a flash sale against seckill-proxy over RESP and reports
// throughput, latency, the reply mix and the invariant checks; it exits 1 if a check fails.
// The services' addresses come from the SECKILL_* variables (eval "$(scripts/devstack.sh env)").
// See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
	"seckill-proxy/internal/chaos"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/loadtest"
	"seckill-proxy/sale"
	"seckill-proxy/upstream"
)

func main() {
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		os.Exit(table(os.Args[1], os.Args[2:]))
	}
	var o loadtest.Options
	fs := flag.NewFlagSet("seckill-bench", flag.ExitOnError)
	fs.StringVar(&o.Mode, "mode", loadtest.ModeProxy, "proxy (RESP to seckill-proxy), legacy (the seeds' client code, EVALSHA of their stock script, through seckill-proxy) or seeds (the seeds' in-app design, for comparison)")
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:6380", "the proxy's RESP address; several, comma-separated, share the connections in turn")
	fs.BoolVar(&o.Faults, "faults", false, "a fault ran during the sale: check what holds under any single fault, buyer by buyer (every order told is confirmed; no false sold-out), and count the replies lost, the buyers told UNAVAILABLE whose order stands and the orders MySQL rejected")
	fs.BoolVar(&o.NoUnavailable, "no-unavailable", false, "with -faults: nothing ran that may cost an UNAVAILABLE (an overload alone), so a single one fails the run")
	fs.BoolVar(&o.RejectedOK, "rejected-ok", false, "with -faults: the fault wrote Redis behind the proxy's back (an operator's SET), so an order told and then rejected is counted, not failed")
	fs.StringVar(&o.SeedsAddr, "seeds-addr", "", "with -mode seeds: the address of a seeds' service that seckill-bench -serve-seeds runs apart (\"\": in this process)")
	serveSeeds := fs.String("serve-seeds", "", "run only the seeds' service for -sku and -units on this address, in this process, until stopped (for -mode seeds -seeds-addr)")
	fs.StringVar(&o.User, "user", "", "AUTH user (its password from SECKILL_BENCH_PASSWORD)")
	fs.StringVar(&o.SKU, "sku", "bench_sku", "the SKU to create or reset in MySQL and sell")
	fs.IntVar(&o.Units, "units", 2000, "units for sale")
	fs.IntVar(&o.Limit, "limit", 1, "per-user limit of the sale")
	fs.IntVar(&o.SaleRate, "sale-rate", 0, "warm the sale with RATE: buys a second through every proxy together (0: no rate); the rest are answered LIMITED")
	fs.IntVar(&o.SaleBurst, "sale-burst", 0, "warm the sale with BURST (0: a tenth of -sale-rate)")
	fs.IntVar(&o.Buckets, "buckets", 1, "warm the sale with BUCKETS: its stock split over that many stock buckets (1 to 16)")
	fs.IntVar(&o.Load.Buyers, "buyers", 80000, "buy requests")
	fs.IntVar(&o.Load.Conns, "conns", 200, "connections")
	fs.IntVar(&o.Load.Pipeline, "pipeline", 1, "requests per round trip")
	fs.IntVar(&o.Load.Qty, "qty", 1, "units per buy")
	fs.Float64Var(&o.Load.RepeatShare, "repeat", 0, "share of requests from a buyer who already tried (duplicates), 0 to 0.99")
	fs.Float64Var(&o.Load.Rate, "rate", 0, "target requests per second; 0 is flat out")
	fs.StringVar(&o.Load.UIDPrefix, "uid-prefix", "", "start every buyer's uid with this (\"\": buyer), to keep the buyers of load processes run at once apart")
	fs.BoolVar(&o.NoSetup, "no-setup", false, "sell -sku's open sale as it is (another process set it up), rather than resetting and warming it")
	fs.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	fs.StringVar(&o.Chart, "chart", "", "write an SVG chart of latency over time and of the reply mix to this file")
	fs.StringVar(&o.OrdersOut, "orders-out", "", "write the order ids told to this process to this file, one per line (for seckill-bench check-together)")
	fs.BoolVar(&o.Check, "check", true, "wait for the sink to drain, then check the invariants")
	fs.DurationVar(&o.Drain, "drain-timeout", 2*time.Minute, "the most to wait for the sink")
	fs.DurationVar(&o.WaitOutcome, "wait-outcome", 0, "every buyer who got an order waits for its outcome with SECKILL.STATUS ... WAIT of this long, and the report gives the time from buy to outcome (p50, p99, max; 0: no waits; mode proxy)")
	fs.IntVar(&o.WaitConns, "wait-conns", 1000, "with -wait-outcome: connections for the waits, each holding one")
	printKeys := fs.Bool("print-keys", false, "print every Redis key of -sku's sale as \"name key\" lines (meta, stock, buyers, outbox, result, sweep, dead, late), and exit: for scripts that read or remove a sale")
	printScriptKeys := fs.Bool("print-script-keys", false, "print the keys that the sale's scripts take, in their order, on one line, and exit (for EVALSHA sent directly)")
	_ = fs.Parse(os.Args[1:])
	if *printKeys || *printScriptKeys {
		if !sale.ValidID([]byte(o.SKU)) {
			fmt.Fprintf(os.Stderr, "seckill-bench: -sku %q is not a valid SKU\n", o.SKU)
			os.Exit(2)
		}
		k := sale.KeysFor(o.SKU)
		if *printKeys {
			for _, nk := range k.Named() {
				fmt.Println(nk[0], nk[1])
			}
		} else {
			fmt.Println(strings.Join(k.ScriptKeys(), " "))
		}
		return
	}
	o.Password = os.Getenv("SECKILL_BENCH_PASSWORD")

	environ := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_BENCH_PASSWORD=") { // seckill-bench's own, not a setting
			environ = append(environ, kv)
		}
	}
	services, err := conf.Load(nil, environ)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	o.Services = services
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *serveSeeds != "" {
		if err := loadtest.RunSeedsService(ctx, o, *serveSeeds); err != nil {
			fmt.Fprintln(os.Stderr, "seckill-bench:", err)
			os.Exit(2)
		}
		return
	}
	rep, err := loadtest.Execute(ctx, o, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "seckill-bench:", err)
		os.Exit(2)
	}
	if !rep.Passed {
		os.Exit(1)
	}
}

// table serves the subcommands that the scripts use: two turn a -json report into a table
// row, one says which master owns a sale:
//
//	seckill-bench fault-plan [-runs N] [-list] [FAULT ...]
//	seckill-bench fault-intro -command C -faults N -runs N -buyers N -conns N -rate N
//	seckill-bench fault-row -report F -stderr F -fault NAME -run N -injected S -lasted MS -rc N
//	seckill-bench fault-row -header
//	seckill-bench admission-table -report F[,F...] -rate R -burst B
//	seckill-bench check-together -sku S -units N -orders F[,F...]
//	seckill-bench owner -sku S [-ask HOST:PORT]
//	seckill-bench toxi create NAME LISTEN UPSTREAM | fault KIND PROXY... | reset
//	seckill-bench bench-report -work DIR -out FILE -n N -base REV -metrics-base REV
//	seckill-bench spread -addr A -prefix P -skus N [-requests R] [-conns C] [-pipeline D]
//	seckill-bench schemes [-schemes S,...] [-addr A] [-one-redis A] [-rounds N] [-json F] [-md F] [-chart F]
func table(name string, args []string) int {
	fs := flag.NewFlagSet("seckill-bench "+name, flag.ContinueOnError)
	switch name {
	case "owner":
		return owner(fs, args)
	case "toxi":
		return toxi(args)
	case "bench-report":
		return benchReport(fs, args)
	case "fault-plan":
		return faultPlan(fs, args)
	case "fault-intro":
		return faultIntro(fs, args)
	case "spread":
		return spread(fs, args)
	case "schemes":
		return schemes(fs, args)
	case "check-together":
		return checkTogether(fs, args)
	}
	report := fs.String("report", "", "the -json report of the run")
	switch name {
	case "fault-row":
		return faultRow(fs, report, args)
	case "admission-table":
		rate := fs.Int("rate", 0, "the sale's RATE")
		burst := fs.Int("burst", 0, "the sale's BURST")
		if fs.Parse(args) != nil {
			return 2
		}
		rep, err := loadtest.ReadReports(*report) // one per load process
		if err != nil {
			fmt.Fprintln(os.Stderr, "seckill-bench:", err)
			return 2
		}
		fmt.Println(loadtest.AdmissionTable(rep, *rate, *burst))
		return 0
	}
	fmt.Fprintf(os.Stderr, "seckill-bench: unknown subcommand %q (fault-plan, fault-intro, fault-row, admission-table, check-together, owner, toxi, bench-report, spread, schemes; flags for a sale)\n", name)
	return 2
}

// benchReport writes BENCHMARKS.md from what make bench left in its work directory.
func benchReport(fs *flag.FlagSet, args []string) int {
	run := loadtest.BenchRun{Now: time.Now(), Commit: loadtest.Revision(), Cores: runtime.NumCPU()}
	fs.StringVar(&run.Work, "work", "", "the bench's work directory")
	out := fs.String("out", "BENCHMARKS.md", "the file to write")
	fs.IntVar(&run.Requests, "n", 0, "requests per measurement of the buy table")
	fs.StringVar(&run.Base, "base", "", "the revision the CPU and pass-through tables compare against")
	fs.StringVar(&run.MetricsBase, "metrics-base", "", "the revision before the metrics")
	if fs.Parse(args) != nil {
		return 2
	}
	md, err := loadtest.BenchReport(run)
	if err == nil {
		err = os.WriteFile(*out, []byte(md), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "seckill-bench bench-report:", err)
		return 2
	}
	fmt.Fprintln(os.Stderr, "wrote", *out)
	return 0
}

// owner prints the address of the master that owns -sku's slot, as the node -ask sees it in
// CLUSTER NODES (a master flagged failing is not one); exit status 1 when it names none.
func owner(fs *flag.FlagSet, args []string) int {
	sku := fs.String("sku", "", "the sale's SKU")
	tag := fs.Int("tag", 0, "the stock bucket's tag number (0: the sale's own keys; see the meta's buckets)")
	ask := fs.String("ask", "127.0.0.1:7000", "the node whose view to read")
	if fs.Parse(args) != nil {
		return 2
	}
	if !sale.ValidID([]byte(*sku)) {
		fmt.Fprintf(os.Stderr, "seckill-bench owner: -sku %q is not a valid SKU\n", *sku)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: *ask, DialTimeout: time.Second})
	defer c.Close()
	text, err := c.Do(ctx, "CLUSTER", "NODES").Text()
	if err != nil {
		fmt.Fprintln(os.Stderr, "seckill-bench owner:", err)
		return 2
	}
	if *tag < 0 || *tag > sale.MaxTag {
		fmt.Fprintf(os.Stderr, "seckill-bench owner: -tag %d is not from 0 to %d\n", *tag, sale.MaxTag)
		return 2
	}
	addr, err := connect.SlotOwner(text, int(upstream.Slot([]byte(sale.BucketKeys(*sku, *tag).Stock))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "seckill-bench owner:", err)
		return 2
	}
	if addr == "" {
		return 1
	}
	fmt.Println(addr)
	return 0
}

// toxi drives the fault suite's toxiproxy (TOXIPROXY_URL, default 127.0.0.1:8474) with
// toxiproxy's Go client: create a proxy, put a network fault of package chaos on proxies, or
// heal them all.
func toxi(args []string) int {
	endpoint := os.Getenv("TOXIPROXY_URL")
	if endpoint == "" {
		endpoint = "127.0.0.1:8474"
	}
	c := toxiproxy.NewClient(endpoint)
	var err error
	switch {
	case len(args) == 4 && args[0] == "create":
		_, err = c.CreateProxy(args[1], args[2], args[3])
	case len(args) >= 3 && args[0] == "fault":
		err = chaos.Inject(c, args[1], args[2:]...)
	case len(args) == 1 && args[0] == "reset":
		err = c.ResetState()
	default:
		fmt.Fprintf(os.Stderr, "usage: seckill-bench toxi create NAME LISTEN UPSTREAM | fault KIND PROXY... | reset (kinds: %s)\n",
			strings.Join(chaos.NetworkFaults(), ", "))
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "seckill-bench toxi:", err)
		return 1
	}
	return 0
}
