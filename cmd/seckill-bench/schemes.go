package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"seckill-proxy/conf"
	"seckill-proxy/internal/loadtest"
)

// schemes sells the seeds' sale under each stock scheme in turn (loadtest.RunSchemes) and
// writes the table, the -json results and the -chart:
//
//	seckill-bench schemes [-schemes S,...] [-addr A] [-one-redis A] [-units N] [-buyers N] ...
func schemes(fs *flag.FlagSet, args []string) int {
	o := loadtest.SchemesOptions{Load: loadtest.Load{Pipeline: 1}}
	names := fs.String("schemes", strings.Join(loadtest.DefaultSchemes, ","), "the schemes to run, comma-separated: "+strings.Join(loadtest.Schemes, ", "))
	fs.StringVar(&o.Proxy, "addr", "127.0.0.1:6380", "the proxy's RESP address (schemes proxy and proxy-buckets; the sink must be running)")
	fs.StringVar(&o.ProxyNoWait, "addr-nowait", "", "the RESP address of a proxy run with SECKILL_BUY_WAIT_REPLICAS=0 (scheme proxy-nowait; the same sink)")
	fs.StringVar(&o.OneRedis, "one-redis", "127.0.0.1:7010", "the one Redis server of scheme one-redis (the dev stack's standalone server)")
	fs.StringVar(&o.SKU, "sku", "bench_scheme", "the prefix of every scheme's SKU")
	fs.IntVar(&o.Units, "units", 2000, "units for sale")
	fs.IntVar(&o.Load.Buyers, "buyers", 80000, "buy requests, one buyer each")
	fs.IntVar(&o.Load.Conns, "conns", 200, "buyers at once")
	fs.IntVar(&o.Load.Qty, "qty", 1, "units per buy")
	fs.IntVar(&o.Buckets, "buckets", 3, "the stock buckets of scheme proxy-buckets (2 to 16)")
	fs.IntVar(&o.Tries, "tries", 3, "how often a buyer tries the optimistic lock before giving up (scheme mysql-lock)")
	fs.IntVar(&o.Rounds, "rounds", 1, "rounds of every scheme; each row is the round of median orders/s")
	fs.DurationVar(&o.Drain, "drain-timeout", 2*time.Minute, "the most to wait for the sink to store the proxy schemes' orders")
	fs.BoolVar(&o.Failover, "failover", false, "force a failover of the master holding each scheme's stock once a quarter of the units are sold, and write the failover table (no chart; schemes one-redis, proxy and proxy-buckets; one-redis then runs on the cluster)")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	from := fs.String("from", "", "read the results from this -json file of an earlier run instead of running (to draw the table and chart again)")
	failoverJSON := fs.String("failover-json", "", "the -json file of a -failover run: the chart gets a panel of what the failover cost each scheme")
	mdOut := fs.String("md", "", "write the markdown table to this file (\"\": standard output)")
	accountOut := fs.String("account-md", "", "write where each scheme's order spent its CPU (by process, and Redis's commands by node) as markdown tables to this file")
	chart := fs.String("chart", "", "write an SVG chart of the schemes side by side to this file")
	if fs.Parse(args) != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "seckill-bench schemes: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	o.Schemes = strings.Split(*names, ",")
	services, err := conf.Load(nil, os.Environ())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	o.Services = services
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "seckill-bench schemes:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var rs, failover []loadtest.SchemeResult
	if *from != "" {
		err = readSchemes(*from, &rs)
	} else {
		rs, err = loadtest.RunSchemes(ctx, o, os.Stderr)
	}
	if err == nil && *failoverJSON != "" {
		err = readSchemes(*failoverJSON, &failover)
	}
	if err == nil {
		err = writeSchemes(rs, failover, o, *jsonOut, *mdOut, *chart)
	}
	if err == nil && *accountOut != "" {
		err = os.WriteFile(*accountOut, []byte(loadtest.SchemesAccountTables(rs)), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "seckill-bench schemes:", err)
		return 2
	}
	return 0
}

// readSchemes reads a -json file of seckill-bench schemes into rs.
func readSchemes(path string, rs *[]loadtest.SchemeResult) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, rs); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(*rs) == 0 {
		return fmt.Errorf("%s holds no scheme's results", path)
	}
	return nil
}

// writeSchemes writes rs (and the failover run's results, for the chart) where the flags say.
func writeSchemes(rs, failover []loadtest.SchemeResult, o loadtest.SchemesOptions, jsonOut, mdOut, chart string) error {
	table := loadtest.SchemesTable(rs)
	if o.Failover {
		table = loadtest.SchemesFailoverTable(rs)
	}
	if mdOut == "" {
		fmt.Print(table)
	} else if err := os.WriteFile(mdOut, []byte(table), 0o644); err != nil {
		return err
	}
	if jsonOut != "" {
		b, err := json.MarshalIndent(rs, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if chart == "" || o.Failover {
		return nil
	}
	f, err := os.Create(chart)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("One sale under each stock scheme: %d units, %d buyers, %d at once", o.Units, o.Load.Buyers, o.Load.Conns)
	err = loadtest.WriteSchemesChart(f, title, rs, failover)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
