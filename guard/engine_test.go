package guard

import (
	"bufio"
	"context"
	"net"
	"testing"

	"seckill-proxy/internal/resp"
)

// buyAll runs reqs through the buy API as one turn of package proxy's core does, with a plain
// connection to each master in place of the core's: each buy answered locally or started,
// the started ones sent as one script call per master and call group (in their order), each
// call's reply settled, and what asks for another round sent again. The buys' results come
// back in the order of reqs.
func buyAll(ctx context.Context, t testing.TB, g *Guard, reqs []BuyRequest) []BuyResult {
	t.Helper()
	res := make([]BuyResult, len(reqs))
	type pending struct {
		i     int
		a     *Attempt
		round int
		addr  string
	}
	var todo []pending
	now := g.opt.Now()
	for i := range reqs {
		if r, ok := g.Local(&reqs[i], now); ok {
			res[i] = r
			continue
		}
		a, err := g.Start(&reqs[i])
		if err != nil {
			res[i].Err = err
			continue
		}
		todo = append(todo, pending{i: i, a: a})
	}
	conns := map[string]*bufio.ReadWriter{}
	connTo := func(addr string) *bufio.ReadWriter {
		if rw := conns[addr]; rw != nil {
			return rw
		}
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		rw := bufio.NewReadWriter(bufio.NewReader(nc), bufio.NewWriter(nc))
		conns[addr] = rw
		return rw
	}
	type call struct {
		addr string
		ps   []pending
	}
	var sold []*Attempt
	for len(todo) > 0 {
		var calls []*call
		open := map[string]map[CallGroup]*call{}
		for _, p := range todo {
			if p.addr == "" {
				addr, err := g.MasterOf(ctx, p.a.SKU())
				if err != nil {
					t.Fatal(err)
				}
				p.addr = addr
			}
			if open[p.addr] == nil {
				open[p.addr] = map[CallGroup]*call{}
			}
			c := open[p.addr][p.a.Group()]
			if c == nil || len(c.ps) == MaxBuysPerCall {
				c = &call{addr: p.addr}
				open[p.addr][p.a.Group()] = c
				calls = append(calls, c)
			}
			c.ps = append(c.ps, p)
		}
		todo = nil
		for _, c := range calls {
			as := make([]*Attempt, len(c.ps))
			for i, p := range c.ps {
				as[i] = p.a
			}
			raw := roundTrip(t, connTo(c.addr), g.AppendCall(nil, as))
			for i, o := range g.SettleCall(as, raw, c.ps[0].round, true, nil) {
				p := c.ps[i]
				switch {
				case o.Retry:
					p.round++
					p.addr = o.Addr
					todo = append(todo, p)
					continue
				case o.Sold:
					sold = append(sold, p.a)
				}
				res[p.i] = o.Result
				g.Finish(p.a)
			}
		}
	}
	g.TeeAll(sold)
	return res
}

// roundTrip writes cmd (raw RESP) on rw and reads its one reply.
func roundTrip(t testing.TB, rw *bufio.ReadWriter, cmd []byte) []byte {
	t.Helper()
	if _, err := rw.Write(cmd); err != nil {
		t.Fatal(err)
	}
	if err := rw.Flush(); err != nil {
		t.Fatal(err)
	}
	raw, err := resp.ReadReply(rw.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
