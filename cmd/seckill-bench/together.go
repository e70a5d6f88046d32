package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"seckill-proxy/conf"
	"seckill-proxy/internal/loadtest"
	"seckill-proxy/sale"
)

// checkTogether checks a sale that several load processes sold at once, each with -orders-out:
// MySQL confirms exactly the orders they were told (loadtest.Confirm). It exits 1 if a check
// fails, 2 if it cannot check.
func checkTogether(fs *flag.FlagSet, args []string) int {
	var o loadtest.Options
	fs.StringVar(&o.SKU, "sku", "", "the sale's SKU")
	fs.IntVar(&o.Units, "units", 0, "the units the sale was warmed with")
	orders := fs.String("orders", "", "the load processes' -orders-out files, comma-separated")
	fs.DurationVar(&o.Drain, "drain-timeout", 2*time.Minute, "the most to wait for the sink")
	if fs.Parse(args) != nil {
		return 2
	}
	if !sale.ValidID([]byte(o.SKU)) || o.Units < 1 || *orders == "" {
		fmt.Fprintln(os.Stderr, "seckill-bench check-together: -sku (a valid SKU), -units (at least 1) and -orders are needed")
		return 2
	}
	ids, err := loadtest.ReadOrders(strings.Split(*orders, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, "seckill-bench check-together:", err)
		return 2
	}
	if o.Services, err = conf.Load(nil, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "seckill-bench check-together:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := loadtest.CheckTogether(ctx, o, ids, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "seckill-bench check-together:", err)
		return 2
	}
	if !rep.Passed {
		return 1
	}
	return 0
}
