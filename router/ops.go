package router

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"seckill-proxy/guard"
	"seckill-proxy/sale"
	"seckill-proxy/upstream"
)

// fieldsOf renders guard fields as a flat field/value array.
func fieldsOf(fs []guard.Field) Map {
	kv := make([]any, 0, 2*len(fs))
	for _, f := range fs {
		kv = append(kv, f.Name, f.Value)
	}
	return Fields(kv...)
}

// cmdSaleInfo: SECKILL.INFO [sku].
func (r *Router) cmdSaleInfo(ctx context.Context, _ *Session, args [][]byte) (Reply, error) {
	if len(args) == 2 {
		sku, err := guard.ParseSKU(args[1])
		if err != nil {
			return nil, err
		}
		fs, err := r.guard.Info(ctx, sku)
		if err != nil {
			return nil, err
		}
		return fieldsOf(fs), nil
	}
	skus, err := r.guard.Sales(ctx)
	if err != nil {
		return nil, err
	}
	list := make(Array, len(skus))
	for i, s := range skus {
		list[i] = BulkString(s)
	}
	out := Fields("sales", list)
	return append(out, fieldsOf(r.proxyCounters())...), nil
}

// proxyCounters are this proxy's own counters, for SECKILL.INFO and INFO.
func (r *Router) proxyCounters() []guard.Field {
	st := r.guard.Stats()
	fs := []guard.Field{
		{Name: "buys", Value: st.Buys, Metric: &guard.Metric{Name: "seckill_proxy_buy_requests_total", Help: "SECKILL.BUY requests (and legacy stock script calls) that passed argument checks."}},
		{Name: "buy_successes", Value: st.Successes, Metric: &guard.Metric{Name: "seckill_proxy_buys_total", Outcome: "order"}},
		{Name: "buy_duplicates", Value: st.Duplicates, Metric: &guard.Metric{Name: "seckill_proxy_buys_total", Outcome: "duplicate"}},
		{Name: "buy_soldout", Value: st.SoldOut, Metric: &guard.Metric{Name: "seckill_proxy_buys_total", Outcome: "soldout"}},
		{Name: "buy_closed", Value: st.Closed, Metric: &guard.Metric{Name: "seckill_proxy_buys_total", Outcome: "closed"}},
		{Name: "buy_unavailable", Value: st.Unavailable, Metric: &guard.Metric{Name: "seckill_proxy_buys_total", Outcome: "unavailable"}},
		{Name: "buy_busy", Value: st.Busy, Metric: &guard.Metric{Name: "seckill_proxy_buys_total", Outcome: "busy"}},
		{Name: "buy_answered_locally", Value: st.LocalSoldOut, Metric: &guard.Metric{Name: "seckill_proxy_buys_answered_locally_total", Help: "Buys answered from the sold-out or closed flag, with no Redis call."}},
		{Name: "buy_scripts", Value: st.Scripts, Metric: &guard.Metric{Name: "seckill_proxy_buy_scripts_total", Help: "Buys sent to the buy script, retries included."}},
		{Name: "wait_short", Value: st.WaitShort, Metric: &guard.Metric{Name: "seckill_proxy_wait_short_total", Help: "WAITs after the buy script that came back with fewer replicas than asked for."}},
		{Name: "wait_off", Value: st.WaitOff, Metric: &guard.Metric{Name: "seckill_proxy_wait_off_total", Help: "Turns of buy calls sent without WAIT because their master has no replica in the cluster's view."}},
		{Name: "buy_told_by_kafka", Value: st.ToldByKafka, Metric: &guard.Metric{Name: "seckill_proxy_buys_told_by_kafka_total", Help: "Buys on a master with no replica online told their order once Kafka held it (buy.no_replica kafka)."}},
		{Name: "buy_refused_no_replica", Value: st.RefusedNoReplica, Metric: &guard.Metric{Name: "seckill_proxy_buys_refused_no_replica_total", Help: "Buys refused because their master had no replica online (buy.no_replica refuse)."}},
		{Name: "buy_told_unreplicated", Value: st.ToldUnreplicated, Metric: &guard.Metric{Name: "seckill_proxy_buys_told_unreplicated_total", Help: "Buys told their order while one copy of it existed: no replica online, buy.no_replica tell."}},
		{Name: "buy_not_known", Value: st.NotKnown, Metric: &guard.Metric{Name: "seckill_proxy_buys_not_known_total", Help: "Buys answered UNAVAILABLE because no replica acknowledged their call (its outcome is not known)."}},
		{Name: "buy_drift", Value: st.Drift, Metric: &guard.Metric{Name: "seckill_proxy_buys_total", Outcome: "drift"}},
		{Name: "buy_donated", Value: st.Donated, Metric: &guard.Metric{Name: "seckill_proxy_buys_donated_total", Help: "Buys of split sales whose units another stock bucket than the buyer's home gave."}},
		{Name: "reservations_settled", Value: st.Settled, Metric: &guard.Metric{Name: "seckill_proxy_reservations_settled_total", Help: "Reservations left between a split sale's donor steps that the sweeper settled."}},
		{Name: "buy_no_sale_local", Value: st.NoSale, Metric: &guard.Metric{Name: "seckill_proxy_buy_no_sale_local_total", Help: "Buys of a SKU with no sale answered with no Redis call, from the SKUs the script recently found to have none."}},
		{Name: "buy_limited_unknown_sku", Value: st.LimitedUnknown, Metric: &guard.Metric{Name: "seckill_proxy_buy_limited_unknown_sku_total", Help: "Buys of SKUs this proxy knew nothing of, LIMITED past admission.unknown_sku_rate (counted in the limited rate outcome too)."}},
		{Name: "sale_events", Value: st.Events, Metric: &guard.Metric{Name: "seckill_proxy_sale_events_total", Help: "Sale events heard from other proxies."}},
		{Name: "sale_events_ignored", Value: st.EventsIgnored, Metric: &guard.Metric{Name: "seckill_proxy_sale_events_ignored_total", Help: "Sale events that Redis did not bear out, or malformed."}},
		{Name: "buy_limited_rate", Value: st.LimitedRate, Metric: &guard.Metric{Name: "seckill_proxy_buys_total", Outcome: "limited_rate"}},
		{Name: "buy_limited_buyer", Value: st.LimitedBuyer, Metric: &guard.Metric{Name: "seckill_proxy_buys_total", Outcome: "limited_buyer"}},
		{Name: "buy_limited_denied", Value: st.LimitedDenied, Metric: &guard.Metric{Name: "seckill_proxy_buys_total", Outcome: "limited_denied"}},
		{Name: "buy_shed", Value: st.Shed, Metric: &guard.Metric{Name: "seckill_proxy_buys_shed_total", Help: "Buys answered BUSY because admission.max_waiting_per_sku of their SKU's were waiting."}},
		{Name: "buy_known_duplicates", Value: st.KnownDuplicates, Metric: &guard.Metric{Name: "seckill_proxy_buys_known_duplicates_total", Help: "Buys answered DUPLICATE from the buyers this proxy sold to, with no Redis call."}},
		{Name: "rate_leases", Value: st.Leases, Metric: &guard.Metric{Name: "seckill_proxy_rate_leases_total", Help: "Lease calls for a sale's rate tokens."}},
		{Name: "rate_leased_tokens", Value: st.LeasedTokens, Metric: &guard.Metric{Name: "seckill_proxy_rate_leased_tokens_total", Help: "Rate tokens the lease calls got."}},
		{Name: "rate_lease_errors", Value: st.LeaseErrors, Metric: &guard.Metric{Name: "seckill_proxy_rate_lease_errors_total", Help: "Lease calls that failed."}},
		{Name: "rate_starved_seconds", Value: st.RateStarved.Seconds(), Metric: &guard.Metric{Name: "seckill_proxy_rate_starved_seconds_total", Help: "Time this proxy refused buys for want of a rate token while its lease call was out (waiting on Redis, not on the rate), summed over the sales."}},
		{Name: "rate_starved_longest_seconds", Value: st.RateStarvedLongest.Seconds(), Metric: &guard.Metric{Name: "seckill_proxy_rate_starved_longest_seconds", Help: "The longest stretch of buys refused for want of a rate token while a lease call was out.", Gauge: true}},
		{Name: "rate_reads", Value: st.RateReads, Metric: &guard.Metric{Name: "seckill_proxy_rate_reads_total", Help: "Sales' rates read from Redis: every sale's at start, then only those of sales bought here lately or named by an event."}},
		{Name: "denied_uids", Value: st.Denied, Metric: &guard.Metric{Name: "seckill_proxy_denied_uids", Help: "Uids on the deny list, as this proxy last read it.", Gauge: true}},
	}
	fs = append(fs, r.guard.WaitFields()...)
	if r.opt.Extra != nil {
		fs = append(fs, r.opt.Extra()...)
	}
	return fs
}

func (r *Router) cmdClose(ctx context.Context, _ *Session, args [][]byte) (Reply, error) {
	sku, err := guard.ParseSKU(args[1])
	if err != nil {
		return nil, err
	}
	prev, err := r.guard.CloseSale(ctx, sku)
	if err != nil {
		return nil, err
	}
	return Fields("sku", sku, "state", sale.StateClosed, "was", prev), nil
}

func (r *Router) cmdRelease(ctx context.Context, _ *Session, args [][]byte) (Reply, error) {
	sku, uid, err := guard.ParseSKUUID(args[1], args[2])
	if err != nil {
		return nil, err
	}
	rel, err := r.guard.Release(ctx, sku, uid)
	if err != nil {
		return nil, err
	}
	if rel.Already {
		return Fields("order", rel.OrderID, "released", 0, "note", "already released"), nil
	}
	return Fields("order", rel.OrderID, "released", rel.Units, "stock", rel.Stock), nil
}

// cmdLimit: SECKILL.LIMIT <sku> RATE <buys/s> [BURST <n>] | RATE OFF.
func (r *Router) cmdLimit(ctx context.Context, _ *Session, args [][]byte) (Reply, error) {
	sku, opt, err := guard.ParseLimit(args[1:])
	if err != nil {
		return nil, err
	}
	state, err := r.guard.Limit(ctx, sku, opt)
	if err != nil {
		return nil, err
	}
	return Fields("sku", sku, "state", state, "rate", opt.Rate, "burst", opt.Burst), nil
}

// cmdDeny: SECKILL.DENY <uid> [TTL <seconds>].
func (r *Router) cmdDeny(ctx context.Context, _ *Session, args [][]byte) (Reply, error) {
	uid, opt, err := guard.ParseDeny(args[1:])
	if err != nil {
		return nil, err
	}
	if _, err := r.guard.Deny(ctx, uid, opt); err != nil {
		return nil, err
	}
	return OK, nil
}

// cmdAllow: SECKILL.ALLOW <uid>: 1 if the uid was denied, else 0.
func (r *Router) cmdAllow(ctx context.Context, _ *Session, args [][]byte) (Reply, error) {
	if !sale.ValidID(args[1]) {
		_, _, err := guard.ParseDeny(args[1:2])
		return nil, err
	}
	removed, err := r.guard.Allow(ctx, string(args[1]))
	if err != nil {
		return nil, err
	}
	if removed {
		return Int(1), nil
	}
	return Int(0), nil
}

func (r *Router) cmdCheck(ctx context.Context, _ *Session, args [][]byte) (Reply, error) {
	sku, err := guard.ParseSKU(args[1])
	if err != nil {
		return nil, err
	}
	diffs, err := r.guard.Check(ctx, sku)
	if err != nil {
		return nil, err
	}
	if len(diffs) == 0 {
		return OK, nil
	}
	out := make(Array, len(diffs))
	for i, d := range diffs {
		out[i] = BulkString(d)
	}
	return out, nil
}

// infoSections are INFO's sections, in order.
var infoSections = []string{"server", "clients", "stats", "seckill"}

// cmdInfo answers INFO [section ...] in Redis's format. With Redis behind the proxy, Redis's
// sections and the proxy's own (infoOf); without, the proxy's own server, clients, stats and
// seckill sections. "all", "everything" and "default" name them all.
func (r *Router) cmdInfo(ctx context.Context, s *Session, args [][]byte) (Reply, error) {
	if r.opt.Upstream != nil {
		reply, err := r.infoOf(ctx, args)
		if v, ok := reply.(Verbatim); ok && !s.Admin {
			return Verbatim(withoutNodes(string(v))), err
		}
		return reply, err
	}
	want := map[string]bool{}
	for _, a := range args[1:] {
		switch s := strings.ToLower(string(a)); s {
		case "all", "everything", "default":
			for _, sec := range infoSections {
				want[sec] = true
			}
		default:
			want[s] = true
		}
	}
	if len(want) == 0 {
		for _, sec := range infoSections {
			want[sec] = true
		}
	}
	var b strings.Builder
	section := func(name string, fs []guard.Field) {
		if !want[name] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "# %s\r\n", strings.ToUpper(name[:1])+name[1:])
		for _, f := range fs {
			fmt.Fprintf(&b, "%s:%v\r\n", f.Name, f.Value)
		}
	}
	var clients int64
	if r.opt.Clients != nil {
		clients = r.opt.Clients()
	}
	section("server", []guard.Field{
		{Name: "redis_version", Value: "7.0.0"},
		{Name: "redis_mode", Value: "standalone"},
		{Name: "seckill_proxy", Value: "1"},
		{Name: "os", Value: runtime.GOOS + " " + runtime.GOARCH},
		{Name: "go_version", Value: runtime.Version()},
		{Name: "process_id", Value: int64(os.Getpid())},
		{Name: "uptime_in_seconds", Value: int64(time.Since(r.started).Seconds())},
	})
	section("clients", []guard.Field{{Name: "connected_clients", Value: clients}})
	section("stats", append([]guard.Field{
		{Name: "total_connections_received", Value: r.nextID.Load()},
		{Name: "total_commands_processed", Value: r.commands.Load()},
	}, r.authFields()...))
	if r.guard != nil {
		section("seckill", r.proxyCounters())
	}
	return BulkString(b.String()), nil
}

// InfoFields are INFO seckill's fields: the proxy's connection and command counters, the
// buy counters and the Extra ones. The metrics endpoint exports them.
func (r *Router) InfoFields() []guard.Field {
	fs := r.proxyStats()
	if r.guard != nil {
		fs = append(fs, r.proxyCounters()...)
	}
	return fs
}

// proxyStats are the proxy's own connection and command counters, for its INFO section.
func (r *Router) proxyStats() []guard.Field {
	var clients int64
	if r.opt.Clients != nil {
		clients = r.opt.Clients()
	}
	return append([]guard.Field{
		{Name: "proxy_process_id", Value: int64(os.Getpid()), InfoOnly: true},
		{Name: "proxy_uptime_in_seconds", Value: int64(time.Since(r.started).Seconds()), InfoOnly: true},
		{Name: "proxy_connected_clients", Value: clients, Metric: &guard.Metric{Name: "seckill_proxy_clients", Help: "Client connections open now.", Gauge: true}},
		{Name: "proxy_total_connections_received", Value: r.nextID.Load(), Metric: &guard.Metric{Name: "seckill_proxy_connections_total", Help: "Client connections accepted."}},
		{Name: "proxy_total_commands_processed", Value: r.commands.Load(), Metric: &guard.Metric{Name: "seckill_proxy_commands_total", Help: "Commands served, of every kind."}},
		{Name: "proxy_command_lookups", Value: r.lookups.Load(), InfoOnly: true},
	}, r.authFields()...)
}

// authFields are AUTH's counters, for INFO's stats section and INFO seckill.
func (r *Router) authFields() []guard.Field {
	return []guard.Field{
		{Name: "auth_failures", Value: r.auth.failures.Load(), Metric: &guard.Metric{Name: "seckill_proxy_auth_failures_total", Help: "AUTH and HELLO AUTH attempts refused."}},
		{Name: "auth_failures_closed_connections", Value: r.auth.closed.Load(), Metric: &guard.Metric{Name: "seckill_proxy_auth_closed_connections_total", Help: "Connections closed after too many failed AUTHs."}},
		{Name: "auth_limited_source", Value: r.auth.limitedSource.Load(), Metric: &guard.Metric{Name: "seckill_proxy_auth_limited_source_total", Help: "AUTHs refused unchecked: too many failures from the source address."}},
		{Name: "auth_limited_user", Value: r.auth.limitedUser.Load(), Metric: &guard.Metric{Name: "seckill_proxy_auth_limited_user_total", Help: "AUTHs refused unchecked: too many failures for the user."}},
		{Name: "auth_revoked_sessions", Value: r.auth.revoked.Load(), Metric: &guard.Metric{Name: "seckill_proxy_auth_revoked_total", Help: "Connections closed because a reload removed or changed their user."}},
	}
}

func (r *Router) txOf(s *Session) *upstream.Tx {
	if s.tx == nil {
		s.tx = r.opt.Upstream.For(s.Proto).NewTx()
	}
	return s.tx
}

// rawReply is a reply passed through as Redis wrote it.
type rawReply []byte

func (r rawReply) write(w Writer) { w.WriteRaw(r) }

func (r *Router) cmdMulti(ctx context.Context, s *Session, _ [][]byte) (Reply, error) {
	return rawReply(r.txOf(s).Multi(ctx)), nil
}

func (r *Router) cmdExec(ctx context.Context, s *Session, _ [][]byte) (Reply, error) {
	return rawReply(r.txOf(s).Exec(ctx)), nil
}

func (r *Router) cmdDiscard(ctx context.Context, s *Session, _ [][]byte) (Reply, error) {
	return rawReply(r.txOf(s).Discard(ctx)), nil
}

func (r *Router) cmdWatch(ctx context.Context, s *Session, args [][]byte) (Reply, error) {
	return rawReply(r.txOf(s).Watch(ctx, args)), nil
}

func (r *Router) cmdUnwatch(_ context.Context, s *Session, _ [][]byte) (Reply, error) {
	return rawReply(r.txOf(s).Unwatch()), nil
}

// CloseSession releases what a connection held upstream (a WATCH's pinned connection).
func (r *Router) CloseSession(s *Session) {
	r.sessions.Delete(s.ID)
	if s.tx != nil {
		s.tx.Close()
	}
}

func (r *Router) cmdWarm(ctx context.Context, _ *Session, args [][]byte) (Reply, error) {
	sku, opt, err := guard.ParseWarm(args[1:])
	if err != nil {
		return nil, err
	}
	w, err := r.guard.Warm(ctx, sku, opt)
	if err != nil {
		return nil, err
	}
	return Fields("sku", sku, "version", w.Version, "stock", w.Stock, "in_flight", w.InFlight, "buckets", int64(len(w.Buckets))), nil
}
