package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	keyspace "seckill-proxy/sale"
)

// maxOrderLine bounds one line of an orders file (an order id is far shorter).
const maxOrderLine = 4096

// writeOrders writes the order ids told to a load process, one per line, for CheckTogether.
func writeOrders(path string, orders []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, id := range orders {
		w.WriteString(id)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadOrders reads the orders files that load processes wrote (-orders-out), and returns
// every order id in them; an id in two files, or a line that is no order id, is an error.
func ReadOrders(paths []string) ([]string, error) {
	var orders []string
	seen := map[string]string{}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 256), maxOrderLine)
		for line := 1; sc.Scan(); line++ {
			id := sc.Text()
			switch {
			case id == "" || strings.ContainsAny(id, " \t"):
				f.Close()
				return nil, fmt.Errorf("%s:%d: not an order id: %q", path, line, id)
			case seen[id] != "":
				f.Close()
				return nil, fmt.Errorf("%s:%d: order %s was also told in %s", path, line, id, seen[id])
			}
			seen[id] = path
			orders = append(orders, id)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return orders, nil
}

// CheckTogether checks one sale that several load processes sold at once (each one's -check sees
// only its own buyers): it waits for the sink to store every order they were told, then
// checks Evaluate's invariants over them all: MySQL confirms exactly the buyers told an
// order id. o gives the SKU, the units it was warmed with and the services; orders are the
// processes' orders together (ReadOrders).
func CheckTogether(ctx context.Context, o Options, orders []string, out, progress io.Writer) (Report, error) {
	x, err := newExecution(o, progress)
	if err != nil {
		return Report{}, err
	}
	defer x.close()
	version, err := x.rc.HGet(ctx, keyspace.KeysFor(o.SKU).Meta, "version").Int64()
	if err != nil {
		return Report{}, fmt.Errorf("the sale of %s: %w", o.SKU, err)
	}
	n := int64(len(orders))
	res := Result{Orders: orders, Requests: n, LastBuy: time.Now(), Replies: map[string]int64{ReplyOrder: n}}
	rep := NewReport(ModeProxy, o.SKU, o.Units, o.Load, res)
	x.check(ctx, &rep, Sale{SKU: o.SKU, Units: o.Units, Version: version, Qty: max(1, o.Load.Qty)}, res)
	fmt.Fprintf(out, "%s: %d orders told by the load processes\n", o.SKU, n)
	for _, c := range rep.Checks {
		mark := "PASS"
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(out, "  %s  %s: %s\n", mark, c.Name, c.Detail)
	}
	if !rep.Passed {
		_, err = fmt.Fprintln(out, "FAILED")
		return rep, err
	}
	_, err = fmt.Fprintln(out, "all checks passed")
	return rep, err
}
