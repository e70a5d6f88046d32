package guard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"seckill-proxy/conf"
	"seckill-proxy/sale"
)

// Options are what a Guard needs beyond its clients.
type Options struct {
	Buy conf.Buy
	// MaxInflight bounds the buy scripts in flight to Redis; past it a buy fails with BUSY.
	MaxInflight int
	// Instance names this proxy in the orders it makes.
	Instance string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Publisher takes sold orders on to Kafka; nil leaves them in the outboxes (for the
	// sweeper of another proxy, or a test). With buy.reply_after=kafka it is required.
	Publisher Publisher
	// Admission configures the checks before Redis; the zero value means conf's defaults.
	Admission conf.Admission
	// Route is where this proxy sends orders (sale.Route of its Kafka topic); "" means the
	// default topic's. WARM records it in the sale, and buys of a sale with another route are
	// refused (DRIFT).
	Route string
	// Topology returns the masters (addresses, sorted) of the cluster's best informed view
	// (connect.Topology.Masters); nil: ReloadSlots reloads once, and trusts go-redis.
	Topology func(context.Context) ([]string, error)
	// LateAfter is outbox.late_after: how long an order may wait for its outcome from the
	// sink (late.go); 0 means conf's default.
	LateAfter time.Duration
}

// Guard runs the buy path and the sale admin commands against the Redis Cluster (and MySQL,
// for WARM). It is safe for concurrent use; build it with New.
type Guard struct {
	rc *redis.ClusterClient
	// lc carries admission's own traffic (the rate leases, the rates and deny list syncs) on
	// connections of its own, a small pool per node, so that a rush of buys on rc's cannot
	// starve the leases that govern it.
	lc       *redis.ClusterClient
	db       *sql.DB
	log      *zap.Logger
	opt      Options
	flags    *Flags
	versions sync.Map // sku -> sale version this proxy last saw
	// perSKU maps sku -> its counters, replaced whole under perSKUMu when a SKU is added
	// (once per sale), so that the buy path reads it with no lock.
	perSKU   atomic.Pointer[map[string]*skuCounters]
	perSKUMu sync.Mutex
	inflight *semaphore.Weighted
	stats    counters
	adm      *admission

	events chan string // sale events waiting to be published
	// ctx ends at Close: the background work's context.
	ctx context.Context

	coalescersMu sync.Mutex
	coalescers   sync.Map // *redis.Client -> *coalescer; new ones are made under coalescersMu
	workers      sync.WaitGroup
	replicaWaits replicaWaits // which masters' WAITs are off for now (replicawait.go)
	noSales      noSales      // SKUs the script found to have no sale (nosale.go)
	driftLog     driftLog     // when each SKU's DRIFT was last logged (drift.go)
	subscribed   atomic.Bool  // the sale events' subscription was confirmed once
	refreshing   atomic.Bool  // a ReloadSlots refresh is running (slots.go)

	stop      chan struct{}
	closeOnce sync.Once
}

// New returns a Guard on the cluster rc and the database db (nil: WARM is unavailable).
func New(rc *redis.ClusterClient, db *sql.DB, log *zap.Logger, opt Options) *Guard {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Admission == (conf.Admission{}) {
		opt.Admission = conf.Default().Admission
	}
	if opt.LateAfter == 0 {
		opt.LateAfter = conf.Default().Outbox.LateAfter
	}
	if opt.Route == "" {
		opt.Route = sale.Route(conf.Default().Kafka.Topic)
	}
	lo := *rc.Options()
	lo.PoolSize, lo.MinIdleConns = admissionPoolSize, 1
	// go-redis appends the nodes it learns to Addrs: the copy must not share its array.
	lo.Addrs = slices.Clip(slices.Clone(lo.Addrs))
	g := &Guard{
		adm:      newAdmission(opt.Admission),
		rc:       rc,
		lc:       redis.NewClusterClient(&lo),
		db:       db,
		log:      log,
		opt:      opt,
		flags:    NewFlags(opt.Buy.SoldOutReprobe),
		inflight: semaphore.NewWeighted(int64(opt.MaxInflight)),
		stop:     make(chan struct{}),
		events:   make(chan string, 1024),
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.ctx = ctx
	g.workers.Go(func() {
		<-g.stop
		cancel()
	})
	g.workers.Go(func() { g.publishEvents(ctx) })
	g.workers.Go(func() { g.listenEvents(ctx) })
	g.workers.Go(func() { g.syncAdmission(ctx) })
	g.workers.Go(func() { g.watchLate(ctx) })
	for range leaseWorkers {
		g.workers.Go(func() { g.leaseWorker(ctx) })
	}
	return g
}

// Close stops the pipeline workers and the sale events. Call it after the last buy has
// returned.
func (g *Guard) Close() {
	g.closeOnce.Do(func() {
		close(g.stop)
		g.workers.Wait()
		_ = g.lc.Close()
	})
	g.workers.Wait()
}

// Flags exposes the local sold-out and closed flags.
func (g *Guard) Flags() *Flags { return g.flags }

// BuyResult is the outcome of one buy: an order id, or an error (see the Err* values and
// DuplicateError).
type BuyResult struct {
	OrderID string
	Err     error
}

// attempt is one buy on its way through the script.
type Attempt struct {
	i       int // index into the batch
	req     *BuyRequest
	keys    []string
	orderID string
	version string
	useEval bool
	reply   []any     // the script's reply for this buy
	err     error     // the script's error, or the pipeline's
	sold    sale.Sold // set when the script sold the order
	// waitSlot counts the attempt among its SKU's waiting buys (nil: not counted).
	waitSlot *atomic.Int64
	// noSaleGen is the no-sale table's generation when the attempt began (see nosale.go).
	noSaleGen uint64
}

// release takes the attempt off its SKU's waiting buys.
func (a *Attempt) release() {
	if a.waitSlot != nil {
		a.waitSlot.Add(-1)
		a.waitSlot = nil
	}
}

// BuyBatch runs the buys of one client pipeline, and returns their results in res (reused,
// and grown if need be; nil is fine). The sold-out flag answers what it can with no
// network call; the rest go to the masters through their coalescers, shared with every other
// client. Results are in the order of reqs.
func (g *Guard) BuyBatch(ctx context.Context, reqs []BuyRequest, res []BuyResult) []BuyResult {
	res = slices.Grow(res[:0], len(reqs))[:len(reqs)]
	clear(res)
	now := g.opt.Now()
	g.stats.buys.Add(int64(len(reqs)))
	var todo []*Attempt // made only when a buy must go to Redis
	for i := range reqs {
		r := &reqs[i]
		if local, ok := g.local(r, now); ok {
			res[i] = local
			continue
		}
		todo = append(todo, g.newAttempt(r, i))
	}
	if len(todo) == 0 {
		return res
	}
	afterKafka := g.opt.Buy.ReplyAfter == conf.ReplyAfterKafka
	if afterKafka && (g.opt.Publisher == nil || !g.opt.Publisher.Healthy()) {
		// Nothing is sold when the buyer could not be told Kafka has the order.
		g.stats.unavailable.Add(int64(len(todo)))
		for _, a := range todo {
			res[a.i].Err = unavailable(errors.New("kafka is not taking orders"))
		}
		return res
	}
	admitted := todo[:0]
	for _, a := range todo {
		slot, ok := g.waitSlot(a.req.SKU)
		if !ok {
			res[a.i].Err = errShed(a.req.SKU, int(g.adm.maxWaiting.Load()))
			continue
		}
		a.waitSlot = slot
		admitted = append(admitted, a)
	}
	todo = admitted
	defer func() {
		for _, a := range admitted {
			a.release()
		}
	}()
	n := int64(len(todo))
	if n > int64(g.opt.MaxInflight) || !g.inflight.TryAcquire(n) {
		g.stats.busy.Add(n)
		for _, a := range todo {
			res[a.i].Err = ErrBusy
		}
		return res
	}
	defer g.inflight.Release(n)

	// A deadline, not a context with a timer: at -P 1 a timer per buy was 5% of the proxy.
	deadline := time.Now().Add(g.opt.Buy.CallTimeout)
	var sold []*Attempt
	for round := 0; len(todo) > 0; round++ {
		g.round(ctx, deadline, todo)
		var again []*Attempt
		for _, a := range todo {
			if retry := g.settle(ctx, deadline, a, &res[a.i], round); retry {
				again = append(again, a)
			} else if a.sold.OrderID != "" {
				sold = append(sold, a)
			}
		}
		todo = again
	}
	g.publish(sold, res, afterKafka)
	return res
}

// publish tees the sold orders to Kafka. With buy.reply_after=kafka it waits for each
// acknowledgement, and a buy whose order Kafka has not taken in time is answered UNAVAILABLE:
// its order stays in the outbox, and a retry answers DUPLICATE with its id.
func (g *Guard) publish(sold []*Attempt, res []BuyResult, afterKafka bool) {
	p := g.opt.Publisher
	if p == nil || len(sold) == 0 {
		return
	}
	if !afterKafka {
		for _, a := range sold {
			p.Publish(a.sold, nil)
		}
		return
	}
	acks := make([]chan error, len(sold))
	for i, a := range sold {
		acks[i] = make(chan error, 1)
		p.Publish(a.sold, func(err error) { acks[i] <- err })
	}
	// A buy waits for Kafka's acknowledgement at most buy.call_timeout, on top of the script's.
	timer := time.NewTimer(g.opt.Buy.CallTimeout)
	defer timer.Stop()
	expired := false
	for i, a := range sold {
		var err error
		if !expired {
			select {
			case err = <-acks[i]:
			case <-timer.C:
				expired = true
			}
		}
		if expired {
			select {
			case err = <-acks[i]:
			default:
				err = errors.New("no acknowledgement in " + g.opt.Buy.CallTimeout.String())
			}
		}
		if err != nil {
			g.stats.unavailable.Add(1)
			res[a.i] = BuyResult{Err: unavailable(fmt.Errorf("kafka: order %s is in the outbox, not yet in Kafka (%v)", a.sold.OrderID, err))}
		}
	}
}

// round sends every attempt's script once, through the coalescer of the master that owns its
// SKU, and waits until every one has its reply or error.
func (g *Guard) round(ctx context.Context, deadline time.Time, todo []*Attempt) {
	g.stats.scripts.Add(int64(len(todo)))
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// Most batches touch one master: group without a map until a second one shows up.
	var first *redis.Client
	var firstGroup []*Attempt
	var others map[*redis.Client][]*Attempt
	for _, a := range todo {
		master, err := g.rc.MasterForKey(ctx, a.keys[0])
		if err != nil {
			a.err = err
			continue
		}
		a.err = nil
		switch {
		case first == nil || master == first:
			first, firstGroup = master, append(firstGroup, a)
		default:
			if others == nil {
				others = map[*redis.Client][]*Attempt{}
			}
			others[master] = append(others[master], a)
		}
	}
	if first == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(1 + len(others))
	g.coalescerFor(first).calls <- call{as: firstGroup, deadline: deadline, done: &wg}
	for master, as := range others {
		g.coalescerFor(master).calls <- call{as: as, deadline: deadline, done: &wg}
	}
	wg.Wait()
}
