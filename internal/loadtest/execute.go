package loadtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"
	"go.uber.org/zap"
	"golang.org/x/term"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/schema"
	keyspace "seckill-proxy/sale"
)

// Modes of a run.
const (
	ModeProxy = "proxy" // buyers talk RESP to the proxy
	ModeSeeds = "seeds" // buyers call the seeds' in-app design (no sink, no checks)
	// ModeLegacy: buyers run the seeds' client code unchanged (a local sold-out map, then
	// EVALSHA of the seeds' stock script on the seeds' keys) against the proxy, which
	// recognises the script; the proxy's checks follow.
	ModeLegacy = "legacy"
)

// Options are seckill-bench's flags.
type Options struct {
	Mode string
	Addr string // the proxy; several, comma-separated, share the connections in turn
	// SeedsAddr is a seeds' service that ServeSeeds runs in a process of its own (as the
	// seeds' service ran apart from its clients); "" runs it in this process.
	SeedsAddr string
	User      string
	Password  string
	SKU       string
	Units     int
	Limit     int
	// SaleRate and SaleBurst warm the sale with RATE and BURST (0: no rate).
	SaleRate, SaleBurst int
	// Buckets warms the sale with BUCKETS (0 or 1: one bucket).
	Buckets int
	// NoSetup sells the sale open now, as another load process set it up, rather than
	// resetting the item and warming it anew.
	NoSetup bool
	Load    Load
	JSON    bool
	Chart   string // SVG file to write, or ""
	Check   bool
	// Faults checks with EvaluateUnderFaults: a fault ran during the sale. RejectedOK: the
	// fault writes Redis behind the proxy's back (an operator's SET), so an order told and
	// then rejected is counted, not failed.
	Faults, RejectedOK bool
	// NoUnavailable: no fault ran that may cost a buyer an UNAVAILABLE (an overload alone):
	// a single one fails the run.
	NoUnavailable bool
	Drain         time.Duration // the most to wait for the sink
	// WaitOutcome, when not 0, has every buyer who got an order wait for its outcome with
	// SECKILL.STATUS ... WAIT of this long, on WaitConns connections of their own, and the
	// report give the time from the buy's answer to the outcome (mode proxy only).
	WaitOutcome time.Duration
	WaitConns   int
	// OrdersOut, when not "", is a file to write the order ids told to this process into,
	// one per line, for CheckTogether (load processes that sell one sale at once).
	OrdersOut string
	// Services are the stack's addresses (SECKILL_* variables, as the binaries read them).
	Services conf.Config
}

// warmRate is the RATE, BURST and BUCKETS options of the sale's WARM.
func (o Options) warmRate() []any {
	var out []any
	if o.Buckets > 1 {
		out = append(out, "BUCKETS", o.Buckets)
	}
	if o.SaleRate > 0 {
		out = append(out, "RATE", o.SaleRate)
		if o.SaleBurst > 0 {
			out = append(out, "BURST", o.SaleBurst)
		}
	}
	return out
}

// Execute runs one benchmark and writes its report to out (progress goes to progress). It
// returns the report; its Passed says whether every check held.
func Execute(ctx context.Context, o Options, out, progress io.Writer) (Report, error) {
	if err := o.Load.Validate(); err != nil {
		return Report{}, err
	}
	if o.Units < 1 || o.Limit < o.Load.Qty {
		return Report{}, fmt.Errorf("units must be at least 1 and limit at least qty; got units %d, limit %d, qty %d", o.Units, o.Limit, o.Load.Qty)
	}
	x, err := newExecution(o, progress)
	if err != nil {
		return Report{}, err
	}
	defer x.close()

	var sale Sale
	switch o.Mode {
	case ModeProxy, ModeLegacy:
		sale, err = x.proxyBuyers(ctx)
	case ModeSeeds:
		err = x.seedsBuyer(ctx)
	default:
		err = fmt.Errorf("mode must be %q, %q or %q, got %q", ModeProxy, ModeSeeds, ModeLegacy, o.Mode)
	}
	if err != nil {
		return Report{}, err
	}
	var cf *confirmer
	var onOrder func(string, time.Time)
	if o.WaitOutcome > 0 {
		if o.Mode != ModeProxy || o.WaitConns < 1 {
			return Report{}, fmt.Errorf("waiting for outcomes needs mode %q and at least 1 connection for it; got mode %q, %d", ModeProxy, o.Mode, o.WaitConns)
		}
		// The waits go to the last proxy named: with several, many a buyer waits on another
		// proxy than the one that sold.
		addrs := strings.Split(o.Addr, ",")
		cf = newConfirmer(ctx, strings.TrimSpace(addrs[len(addrs)-1]), o.User, o.Password, o.SKU, o.WaitConns, o.Units+o.Load.Conns, o.WaitOutcome)
		onOrder = cf.add
	}
	done, stop := showProgress(progress, o.Load.Buyers)
	res := Run(ctx, o.Load, x.buy, x.pipe, func(n int) { done.Add(int64(n)) }, onOrder)
	stop()
	rep := NewReport(o.Mode, o.SKU, o.Units, o.Load, res)
	if cf != nil {
		fmt.Fprintf(progress, "waiting for the outcomes of %d orders...\n", len(res.Orders))
		told := cf.finish()
		rep.Outcomes = &told
	}
	if res.Requests == 0 {
		return rep, ErrNoRequests
	}
	if o.OrdersOut != "" {
		if err := writeOrders(o.OrdersOut, res.Orders); err != nil {
			return rep, err
		}
	}
	if o.Mode == ModeLegacy {
		if res.Orders, err = legacyOrders(ctx, x.rc, o.SKU, res.Orders); err != nil {
			return rep, err
		}
	}
	if (o.Mode == ModeProxy || o.Mode == ModeLegacy) && o.Check {
		x.check(ctx, &rep, sale, res)
	}
	if o.Chart != "" {
		if err := x.writeChart(res); err != nil {
			return rep, err
		}
	}
	if o.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return rep, enc.Encode(rep)
	}
	return rep, rep.WriteText(out)
}

// execution is one benchmark's services and buyers while Execute runs it.
type execution struct {
	o        Options
	db       *sql.DB
	rc       *redis.ClusterClient
	progress io.Writer
	buy      Buyer
	pipe     func(context.Context, []string) []result
	closers  []func()
}

// newExecution opens the stack's MySQL and Redis for o; close closes them, after whatever
// the run added to closers.
func newExecution(o Options, progress io.Writer) (*execution, error) {
	db, err := schema.Open(o.Services.MySQL)
	if err != nil {
		return nil, err
	}
	rc := connect.Redis(o.Services.Redis)
	x := &execution{o: o, db: db, rc: rc, progress: progress}
	x.closers = append(x.closers, func() { db.Close() }, func() { rc.Close() })
	return x, nil
}

func (x *execution) close() {
	for i := len(x.closers) - 1; i >= 0; i-- {
		x.closers[i]()
	}
}

// proxyBuyers connects to the proxies of o.Addr (buyers take them in turn) and opens the sale
// there, unless o.NoSetup.
func (x *execution) proxyBuyers(ctx context.Context) (Sale, error) {
	o := x.o
	if _, err := schema.Migrate(ctx, x.db, zap.NewNop()); err != nil {
		return Sale{}, err
	}
	addrs := strings.Split(o.Addr, ",")
	var buys []Buyer
	var pipes []func(context.Context, []string) []result
	var first *redis.Client
	for _, addr := range addrs {
		pc := redis.NewClient(&redis.Options{Addr: strings.TrimSpace(addr), Username: o.User, Password: o.Password,
			PoolSize: max(1, o.Load.Conns/len(addrs)), MinIdleConns: max(1, o.Load.Conns/len(addrs)), ReadTimeout: 10 * time.Second, Protocol: 2})
		x.closers = append(x.closers, func() { pc.Close() })
		if first == nil {
			first = pc
		}
		b, p := ProxyBuyer(pc, o.SKU, o.Load.Qty)
		if o.Mode == ModeLegacy {
			b, p = LegacyBuyer(pc, o.SKU, o.Load.Qty)
		}
		buys, pipes = append(buys, b), append(pipes, p)
	}
	var version int64
	var err error
	if o.NoSetup {
		version, err = x.rc.HGet(ctx, keyspace.KeysFor(o.SKU).Meta, "version").Int64()
	} else {
		version, err = Setup(ctx, x.db, first, o.SKU, o.Units, o.Limit, o.warmRate()...)
	}
	if err != nil {
		return Sale{}, fmt.Errorf("the sale of %s: %w", o.SKU, err)
	}
	x.buy, x.pipe = buys[0], pipes[0]
	if len(addrs) > 1 {
		var turn atomic.Uint64
		x.buy = func(ctx context.Context, uid string) (string, error) {
			return buys[turn.Add(1)%uint64(len(buys))](ctx, uid)
		}
		x.pipe = func(ctx context.Context, uids []string) []result {
			return pipes[turn.Add(1)%uint64(len(pipes))](ctx, uids)
		}
	}
	return Sale{SKU: o.SKU, Units: o.Units, Version: version, Qty: o.Load.Qty}, nil
}

// seedsBuyer connects to the seeds' server at o.SeedsAddr, or starts one here.
func (x *execution) seedsBuyer(ctx context.Context) error {
	o := x.o
	addr := o.SeedsAddr
	if addr == "" {
		seeds, err := OpenSeeds(ctx, o, x.rc)
		if err != nil {
			return err
		}
		x.closers = append(x.closers, func() { seeds.Close() })
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		sctx, stopSeeds := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- seeds.Serve(sctx, ln) }()
		x.closers = append(x.closers, func() {
			stopSeeds()
			<-served
		})
		addr = ln.Addr().String()
	}
	sc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: o.Load.Conns, MinIdleConns: o.Load.Conns, ReadTimeout: 10 * time.Second, Protocol: 2})
	x.closers = append(x.closers, func() { sc.Close() })
	x.buy, x.pipe = ProxyBuyer(sc, o.SKU, o.Load.Qty)
	return nil
}

// sum is the sum over the sale's buckets of one command's integer reply.
func (x *execution) sum(ctx context.Context, cmd func(redis.Pipeliner, keyspace.Keys) redis.Cmder) (int64, error) {
	return sumBuckets(ctx, x.rc, x.o.SKU, cmd)
}

// check waits for the sink to store the sale's orders, then adds the invariants' checks to rep.
func (x *execution) check(ctx context.Context, rep *Report, sale Sale, res Result) {
	o := x.o
	fmt.Fprintf(x.progress, "waiting for the sink to store %d orders...\n", len(res.Orders))
	dctx, cancel := context.WithTimeout(ctx, o.Drain)
	target := len(res.Orders)
	if o.Faults {
		// A split sale's reservations that a fault left are settled by the sweeper within
		// seconds; only then do its buyers count what Redis sold.
		x.await(ctx, 30*time.Second, 100*time.Millisecond, func(p redis.Pipeliner, k keyspace.Keys) redis.Cmder { return p.ZCard(ctx, k.Reserved) })
		// Every unit Redis sold, reply lost or not, is to reach MySQL.
		if n, err := x.sum(ctx, func(p redis.Pipeliner, k keyspace.Keys) redis.Cmder { return p.HLen(ctx, k.Buyers) }); err == nil {
			target = max(target, int(n))
		}
	}
	drain, err := Drain(dctx, x.db, sale, target, res.LastBuy)
	cancel()
	if err != nil {
		rep.AddChecks([]Check{{Name: "drain", Detail: err.Error()}}, 0)
		return
	}
	// The outbox empties a moment after Kafka acknowledges; give it that moment.
	x.await(ctx, 5*time.Second, 10*time.Millisecond, func(p redis.Pipeliner, k keyspace.Keys) redis.Cmder { return p.XLen(ctx, k.Outbox) })
	AwaitOutcomes(ctx, 30*time.Second, x.db, x.rc, sale)
	sale.NotKnown, sale.SoldOutTold = res.NotKnown, res.Replies[ReplySoldOut]
	st, err := GatherWithin(ctx, 30*time.Second, x.db, x.rc, sale, res.Orders)
	switch {
	case err != nil:
		rep.AddChecks([]Check{{Name: "state", Detail: "reading the sale's state: " + err.Error()}}, drain)
	case o.Faults:
		checks := EvaluateUnderFaults(st, o.RejectedOK)
		if o.NoUnavailable {
			n := res.Replies[ReplyUnavailable]
			checks = append(checks, Check{"no UNAVAILABLE without a fault", n == 0, fmt.Sprintf("%d buyers told UNAVAILABLE", n)})
		}
		rep.AddChecks(checks, drain)
		rep.LostReplies = max(0, st.Confirmed+st.Rejected-st.Successes)
		rep.Rejected = st.Rejected
		rep.ToldRejected = int64(len(st.ToldNotConfirmed))
		rep.NotKnownConfirmed = st.NotKnownConfirmed
	default:
		checks := Evaluate(st)
		if rep.Outcomes != nil {
			checks = append(checks, outcomesTold(*rep.Outcomes, len(res.Orders)))
		}
		rep.AddChecks(checks, drain)
	}
}

// await polls, every step up to within, until the sum over the sale's buckets of cmd is 0.
func (x *execution) await(ctx context.Context, within, step time.Duration, cmd func(redis.Pipeliner, keyspace.Keys) redis.Cmder) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(step) {
		if n, _ := x.sum(ctx, cmd); n == 0 {
			return
		}
	}
}

func (x *execution) writeChart(res Result) error {
	o := x.o
	f, err := os.Create(o.Chart)
	if err != nil {
		return err
	}
	err = WriteChart(f, fmt.Sprintf("seckill-bench %s: %d buyers, %d units, %d connections", o.Mode, o.Load.Buyers, o.Units, o.Load.Conns), res, o.Units, o.Load.Qty)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// OpenSeeds sets up o.Units of o.SKU under the seeds' keys, with the seeds' Kafka producer;
// Serve then answers buyers (rc is the cluster client it calls the seeds' script with).
func OpenSeeds(ctx context.Context, o Options, rc *redis.ClusterClient) (*Seeds, error) {
	return openSeeds(ctx, o.Services.Kafka, rc, o.SKU, o.Units)
}

// openSeeds sets up units of sku under the seeds' keys on rc, with the seeds' Kafka producer
// sending to k's topic with ".seeds" after it.
func openSeeds(ctx context.Context, k conf.Kafka, rc redis.UniversalClient, sku string, units int) (*Seeds, error) {
	sc, err := connect.Sarama(k)
	if err != nil {
		return nil, err
	}
	producer, err := sarama.NewSyncProducer(k.Brokers, sc)
	if err != nil {
		return nil, err
	}
	seeds, err := NewSeeds(ctx, rc, producer, k.Topic+".seeds", sku, units)
	if err != nil {
		_ = producer.Close()
		return nil, err
	}
	return seeds, nil
}

// RunSeedsService serves the seeds' design for o.SKU and o.Units on addr until ctx ends.
func RunSeedsService(ctx context.Context, o Options, addr string) error {
	rc := connect.Redis(o.Services.Redis)
	defer rc.Close()
	seeds, err := OpenSeeds(ctx, o, rc)
	if err != nil {
		return err
	}
	defer seeds.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	err = seeds.Serve(ctx, ln)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// showProgress shows a live bar on a terminal, or a plain line a second otherwise, until stop.
func showProgress(w io.Writer, total int) (*atomic.Int64, func()) {
	var done atomic.Int64
	quit := make(chan struct{})
	finished := make(chan struct{})
	f, isFile := w.(*os.File)
	tty := isFile && term.IsTerminal(int(f.Fd()))
	go func() {
		defer close(finished)
		var bar *progressbar.ProgressBar
		if tty {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("buying"),
				progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("buys"), progressbar.OptionThrottle(100*time.Millisecond))
		}
		every := time.Second
		if tty {
			every = 100 * time.Millisecond
		}
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		for {
			select {
			case <-quit:
				if bar != nil {
					_ = bar.Set(int(done.Load()))
					_ = bar.Finish()
					fmt.Fprintln(w)
				} else {
					fmt.Fprintf(w, "buying: %d/%d done\n", done.Load(), total)
				}
				return
			case <-ticker.C:
				if bar != nil {
					_ = bar.Set(int(done.Load()))
				} else {
					fmt.Fprintf(w, "buying: %d/%d\n", done.Load(), total)
				}
			}
		}
	}()
	return &done, func() {
		close(quit)
		<-finished
	}
}
