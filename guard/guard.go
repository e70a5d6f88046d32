package guard

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/salescan"
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
	// Pending hears of every stock bucket a call may write outbox entries or reservations to,
	// before the call (salescan.Pending: the sweeper reads those every sweep); nil: none.
	// Mark says whether the mark is queued (or was sent lately): false, mark again next time.
	Pending interface{ Mark(tag string) bool }
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
	// Partitions is the orders topic's partition count (kafka.partitions): WARM picks a split
	// sale's bucket tags so that their Kafka keys fall on different partitions too (0: it
	// does not try).
	Partitions int
	// Status bounds the buyers who wait for their outcome (waiters.go); the zero value means
	// conf's defaults.
	Status conf.Status
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
	layouts  sync.Map // sku -> *saleLayout: a split sale's buckets, for one version (buckets.go)
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

	workers     sync.WaitGroup
	replicaView connect.ReplicaView // how many replicas each master has (replicawait.go)
	noSales     noSales             // SKUs the script found to have no sale (nosale.go)
	driftLog    driftLog            // when each SKU's DRIFT was last logged (drift.go)
	subscribed  atomic.Bool         // the sale events' subscription was confirmed once
	refreshing  atomic.Bool         // a ReloadSlots refresh is running (slots.go)
	recent      recentSales         // the SKUs bought here lately (recent.go)
	lateMu      sync.Mutex
	lateShown   map[string]bool     // the SKUs whose last figures showed late orders (salemetrics.go)
	lateFrom    string              // the last sale the late-order watch looked at (its goroutine's)
	latePasses  int                 // the late-order watch's passes since it began to lead (its goroutine's)
	lateSettled map[string]lateSeen // sales whose every order had its outcome (late.go; its goroutine's)
	waits       waiters             // buyers waiting for their outcome (waiters.go)
	statusAsks  chan statusAsk      // their first status reads, gathered (statusbatch.go)

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
	if opt.Status == (conf.Status{}) {
		opt.Status = conf.Default().Status
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
		// As many asks as a batch takes: more wait their turn in batchedStatus.
		statusAsks: make(chan statusAsk, statusBatchMax),
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
	g.workers.Go(func() { g.readStatuses(ctx) })
	g.workers.Go(func() { g.watchReplicas(ctx) })
	for range leaseWorkers {
		g.workers.Go(func() { g.leaseWorker(ctx) })
	}
	return g
}

// Close stops the background workers and the sale events. Call it after the last buy has
// returned.
func (g *Guard) Close() {
	g.closeOnce.Do(func() {
		g.waits.mu.Lock()
		g.waits.closed = true // no reader starts from now on
		g.waits.mu.Unlock()
		close(g.stop)
		g.workers.Wait()
		_ = g.lc.Close()
	})
	g.workers.Wait()
}

// mark tells Options.Pending that a call may write to the bucket of hash tag tag.
func (g *Guard) mark(tag string) {
	if g.opt.Pending != nil {
		g.opt.Pending.Mark(tag)
	}
}

// markCall is mark for a script call's bucket, through the clock the attempt carries (its
// sale's or bucket's, nil: none), so that a bucket marked within salescan.MarkEvery costs one
// atomic load and not a lookup by its tag: an event day sells thousands of buckets at once.
func (g *Guard) markCall(a *Attempt) {
	if g.opt.Pending == nil {
		return
	}
	if a.marked == nil {
		g.opt.Pending.Mark(a.tag)
		return
	}
	now := time.Now().UnixNano()
	if now-a.marked.Load() < int64(salescan.MarkEvery) {
		return
	}
	if g.opt.Pending.Mark(a.tag) {
		a.marked.Store(now)
	}
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
	req  BuyRequest
	keys []string
	// tag is the hash tag of the keys, and marked the clock of its last pending mark (see
	// markCall); both made once per sale or bucket.
	tag     string
	marked  *atomic.Int64
	orderID string
	version string
	useEval bool
	// lay is the split sale's layout the attempt goes by (nil: one bucket), and bucket the
	// index in it of the bucket its call goes to: the buyer's home.
	lay    *saleLayout
	bucket int
	donate bool      // the home bucket answered EMPTY: Donate finishes the buy
	reply  []string  // the script's reply for this buy, its elements as sale.Field reads them
	err    error     // the script's error, or the pipeline's
	sold   sale.Sold // set when the script sold the order
	// waitSlot counts the attempt among its SKU's waiting buys (nil: not counted).
	waitSlot *atomic.Int64
	// noSaleGen is the no-sale table's generation when the attempt began (see nosale.go).
	noSaleGen uint64
	// flagGen is the flags' generation when the attempt began: a CLOSED it gets flags the
	// sale closed only if no Clear (a re-open, a re-warm) came since.
	flagGen uint64
	// noReplica: its call went to a master with no replica online (NoReplica).
	noReplica uint8
}

// release takes the attempt off its SKU's waiting buys.
func (a *Attempt) release() {
	if a.waitSlot != nil {
		a.waitSlot.Add(-1)
		a.waitSlot = nil
	}
}
