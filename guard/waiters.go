package guard

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/sale"
)

// Buyers who wait for their order's outcome (SECKILL.STATUS ... WAIT, and the outcome
// channels), woken from memory with no Redis call per buyer:
//
//   - The sink appends each batch's outcomes to the home bucket's outcome stream
//     (sale.Keys.Outcomes, outcome.lua), one entry per batch: uid -> the outcome as STATUS
//     tells it.
//   - For each bucket with a waiting buyer, one reader per proxy reads that stream with a
//     blocking XREAD from where it stood when its first buyer began to wait, and wakes the
//     buyers the entries name. A buyer registers before it reads its status, so an outcome
//     is either in what it reads or in an entry read after.
//   - Every status.resync, and after any failed read (a reconnect, a failover), the reader
//     reads its waiting buyers' outcomes from the result hash in one call: the catch-up for
//     an entry it could not read (trimmed, lost in a failover, or a sink that writes none).
//   - A buyer whose order is on another proxy's outbox is woken the same way: the stream is
//     the sale's, not the proxy's.

// ErrTooManyWaiters: status.max_waiters buyers are waiting on this proxy already.
var ErrTooManyWaiters = errors.New("BUSY too many buyers are waiting for their outcome on this proxy (status.max_waiters); poll SECKILL.STATUS")

// outcomeBlock is how long one read of an outcome stream waits for an entry, and
// outcomeCount how many entries it takes at most.
const (
	outcomeBlock = time.Second
	outcomeCount = 100
)

// waiters are the buyers waiting on this proxy, by the outcome stream that will wake them.
type waiters struct {
	mu      sync.Mutex
	readers map[string]*outcomeReader // by the bucket's outcome stream key
	n       int
	closed  bool // the guard is closing: no reader starts (workers.Go must not race its Wait)
	// counters, for INFO and the metrics; noSale and limited count the STATUS reads (waits and
	// channels among them) of SKUs with no sale answered from the no-sale table, and of
	// unknown SKUs past admission.unknown_sku_rate (admitStatus)
	waits, woken, resynced, timedOut, retried, noSale, limited atomic.Int64
	// started counts the outcome readers started (one per bucket that got its first waiter)
	started atomic.Int64
	// reads counts the status.lua calls sent (a batch's bucket, or one STATUS)
	reads atomic.Int64
}

// outcomeReader reads one bucket's outcome stream for the buyers waiting on it.
type outcomeReader struct {
	keys sale.Keys
	// byUID are the waits by buyer, a set each: however many waits one buyer has (a blocking
	// STATUS, and outcome channels on many connections, some perhaps not the buyer's own),
	// ending one costs the same, and none is refused for the others' sake. Guarded by
	// waiters.mu.
	byUID map[string]map[*Waiter]struct{}
	ready chan struct{} // closed once the reader knows where the stream stands (or err)
	err   error
}

// Waiter is one buyer waiting for their order's outcome. C gets it once, when it is known
// (confirmed, rejected, cancelled); Stop ends the wait. It is safe for concurrent use.
type Waiter struct {
	C   chan Status
	g   *Guard
	r   *outcomeReader
	uid string

	mu      sync.Mutex
	orderID string  // the order waited for, once the buyer's status was read
	early   *Status // an outcome that came before that
	done    bool    // the outcome was given, or the wait stopped
}

// final says whether a status is the order's last word.
func (s Status) final() bool {
	return s.State == "confirmed" || s.State == "rejected" || s.State == "cancelled"
}

// Watch starts waiting for uid's order in sku's sale. It reads the buyer's status first: a
// status with no wait left (no order, or its outcome known) comes back with a nil Waiter,
// having cost one status read (batched with others' when the sale is known) and no outcome
// reader, so that made-up buyers start no blocking read and register nothing. A pending order
// registers the buyer, then reads the status again: an outcome is either in that read or in a
// stream entry read after it. The Waiter's C gets the outcome, and the caller must Stop it. A
// SKU this proxy knows nothing of is admitted as a STATUS is (admitStatus).
func (g *Guard) Watch(ctx context.Context, sku, uid string) (*Waiter, Status, error) {
	known, none, err := g.admitStatus(sku, g.opt.Now())
	if none || err != nil {
		return nil, Status{State: "none"}, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	var k sale.Keys
	if !known {
		st, err := g.readStatus(ctx, sku, uid)
		if err != nil || st.State == "none" || st.final() {
			return nil, st, err
		}
	}
	if k, err = g.homeKeys(ctx, sku, uid, true); err != nil {
		return nil, Status{}, err
	}
	if known {
		st, err := g.batchedStatus(ctx, sku, uid, k)
		if err != nil || st.State == "none" || st.final() {
			return nil, st, err
		}
	}
	w, err := g.waits.add(g, k, uid)
	if err != nil {
		return nil, Status{}, err
	}
	select {
	case <-w.r.ready:
	case <-ctx.Done():
		w.Stop()
		return nil, Status{}, unavailable(ctx.Err())
	}
	if w.r.err != nil {
		w.Stop()
		return nil, Status{}, unavailable(w.r.err)
	}
	st, err := g.batchedStatus(ctx, sku, uid, k)
	if err != nil || st.State == "none" || st.final() {
		w.Stop()
		return nil, st, err
	}
	if early, ok := w.know(st.OrderID); ok {
		w.Stop()
		return nil, early, nil
	}
	g.waits.waits.Add(1) // the buyer's order is pending: the wait begins
	return w, st, nil
}

// WaitStatus answers SECKILL.STATUS <sku> <uid> WAIT: the buyer's status at once when there is
// nothing to wait for, else their order's outcome as soon as it is known, or, after wait (or
// when ctx ends: the client left), the status it had. A first read that Redis fails (a master
// failing over) is tried again while the wait lasts (WatchThrough), as a client blocked in
// BLPOP is not bothered by a failover of the master it waits on: only a wait whose every read
// failed ends UNAVAILABLE.
func (g *Guard) WaitStatus(ctx context.Context, sku, uid string, wait time.Duration) (Status, error) {
	end := time.Now().Add(wait)
	w, st, err := g.WatchThrough(ctx, sku, uid, end)
	if w == nil || err != nil {
		return st, err
	}
	return g.await(ctx, w, st, time.Until(end))
}

// WatchThrough is Watch, tried again while Redis fails it (UNAVAILABLE: a master failing
// over), 50 ms apart doubling to 1 s, until end (zero: no end) or until ctx ends.
func (g *Guard) WatchThrough(ctx context.Context, sku, uid string, end time.Time) (*Waiter, Status, error) {
	backoff := 50 * time.Millisecond
	for {
		w, st, err := g.Watch(ctx, sku, uid)
		if err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil || !end.IsZero() && time.Until(end) <= backoff {
			return w, st, err
		}
		g.waits.retried.Add(1)
		select {
		case <-time.After(backoff):
			backoff = min(2*backoff, time.Second)
		case <-ctx.Done():
			return nil, st, ctx.Err()
		case <-g.stop:
			return nil, st, err
		}
	}
}

// await waits up to wait for w's outcome; st is the status to answer when none comes.
func (g *Guard) await(ctx context.Context, w *Waiter, st Status, wait time.Duration) (Status, error) {
	defer w.Stop()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case out := <-w.C:
		return out, nil
	case <-timer.C:
		g.waits.timedOut.Add(1)
		return st, nil
	case <-ctx.Done():
		return st, ctx.Err()
	}
}

// add registers a buyer, starting the bucket's reader if none runs.
func (ws *waiters) add(g *Guard, k sale.Keys, uid string) (*Waiter, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	switch {
	case ws.closed:
		return nil, unavailable(errors.New("the proxy is shutting down"))
	case ws.n >= g.opt.Status.MaxWaiters:
		return nil, ErrTooManyWaiters
	}
	if ws.readers == nil {
		ws.readers = map[string]*outcomeReader{}
	}
	r := ws.readers[k.Outcomes]
	if r == nil {
		r = &outcomeReader{keys: k, byUID: map[string]map[*Waiter]struct{}{}, ready: make(chan struct{})}
		ws.readers[k.Outcomes] = r
		ws.started.Add(1)
		g.workers.Go(func() { g.readOutcomes(r) })
	}
	w := &Waiter{C: make(chan Status, 1), g: g, r: r, uid: uid}
	set := r.byUID[uid]
	if set == nil {
		set = map[*Waiter]struct{}{}
		r.byUID[uid] = set
	}
	set[w] = struct{}{}
	ws.n++
	return w, nil
}

// Stop ends the wait (a second call does nothing).
func (w *Waiter) Stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
	ws := &w.g.waits
	ws.mu.Lock()
	defer ws.mu.Unlock()
	set := w.r.byUID[w.uid]
	if _, ok := set[w]; ok {
		delete(set, w)
		ws.n--
	}
	if len(set) == 0 {
		delete(w.r.byUID, w.uid)
	}
}

// know records the order waited for, once the buyer's status was read; ok: its outcome had
// come already.
func (w *Waiter) know(orderID string) (early Status, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.orderID = orderID
	if w.early != nil && w.early.OrderID == orderID {
		w.done = true
		return *w.early, true
	}
	w.early = nil
	return Status{}, false
}

// offer gives the waiter an outcome of its buyer's: taken if it is of the order waited for
// (an outcome of an order of an earlier sale is not), and then counted in count before the
// waiter can answer its buyer, so that a reader of the counters who saw the answer sees the count.
func (w *Waiter) offer(st Status, count *atomic.Int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.done:
		return
	case w.orderID == "":
		w.early = &st
		return
	case st.OrderID != w.orderID:
		return
	}
	w.done = true
	count.Add(1)
	w.C <- st
}

// told reads an outcome as the stream and STATUS tell it: "confirmed <id>", "rejected <id>
// <reason>", "cancelled <id>".
func told(s string) (Status, bool) {
	state, rest, _ := strings.Cut(s, " ")
	id, reason, _ := strings.Cut(rest, " ")
	st := Status{State: state, OrderID: id, Reason: reason}
	return st, st.final() && id != ""
}

// readOutcomes is a bucket's reader: it finds where the stream stands, then reads it for as
// long as buyers wait on it, with a catch-up from the result hash every status.resync and
// after a failed read.
func (g *Guard) readOutcomes(r *outcomeReader) {
	ctx := g.ctx
	pos, err := g.outcomesEnd(ctx, r.keys)
	if err != nil {
		r.err = err
		g.waits.mu.Lock()
		delete(g.waits.readers, r.keys.Outcomes) // the next buyer tries again
		g.waits.mu.Unlock()
		close(r.ready)
		return
	}
	close(r.ready)
	resync := time.Now()
	backoff := 50 * time.Millisecond
	for {
		if g.waits.retire(r) || ctx.Err() != nil {
			return
		}
		res, err := g.rc.XRead(ctx, &redis.XReadArgs{Streams: []string{r.keys.Outcomes, pos}, Count: outcomeCount, Block: outcomeBlock}).Result()
		lost := false
		switch {
		case errors.Is(err, redis.Nil): // nothing came
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			g.log.Debug("reading an outcome stream failed; catching up from the results", zap.String("key", r.keys.Outcomes), zap.Error(err))
			lost = true
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		default:
			backoff = 50 * time.Millisecond
			pos = g.wakeFrom(r, res, pos)
		}
		if lost || time.Since(resync) >= g.opt.Status.Resync {
			g.resyncOutcomes(ctx, r)
			resync = time.Now()
		}
	}
}

// wakeFrom wakes the buyers whose outcomes res holds, and returns the last entry's id (pos if
// none).
func (g *Guard) wakeFrom(r *outcomeReader, res []redis.XStream, pos string) string {
	for _, s := range res {
		for _, e := range s.Messages {
			pos = e.ID
			for uid, v := range e.Values {
				if s, ok := v.(string); ok {
					if st, ok := told(s); ok {
						g.waits.wake(r, uid, st, &g.waits.woken)
					}
				}
			}
		}
	}
	return pos
}

// outcomesEnd is the id of the stream's last entry ("0-0" for none): the reader reads what
// comes after it.
func (g *Guard) outcomesEnd(ctx context.Context, k sale.Keys) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	last, err := g.rc.XRevRangeN(ctx, k.Outcomes, "+", "-", 1).Result()
	switch {
	case err != nil:
		return "", err
	case len(last) == 0:
		return "0-0", nil
	}
	return last[0].ID, nil
}

// retire ends a reader with no buyer waiting on it (and takes it off the readers, so that the
// next buyer starts another).
func (ws *waiters) retire(r *outcomeReader) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(r.byUID) > 0 {
		return false
	}
	if ws.readers[r.keys.Outcomes] == r {
		delete(ws.readers, r.keys.Outcomes)
	}
	return true
}

// wake gives uid's waiters on r an outcome, counted in count for each one it woke.
func (ws *waiters) wake(r *outcomeReader, uid string, st Status, count *atomic.Int64) {
	ws.mu.Lock()
	list := slices.Collect(maps.Keys(r.byUID[uid]))
	ws.mu.Unlock()
	for _, w := range list {
		w.offer(st, count)
	}
}

// resyncOutcomes reads the outcomes of r's waiting orders from the result hash, in one call,
// and wakes the buyers whose outcome is known.
func (g *Guard) resyncOutcomes(ctx context.Context, r *outcomeReader) {
	g.waits.mu.Lock()
	var ids []string
	uids := map[string]string{} // order id -> uid
	for uid, set := range r.byUID {
		for w := range set {
			w.mu.Lock()
			id := w.orderID
			w.mu.Unlock()
			if id != "" && uids[id] == "" {
				ids = append(ids, id)
				uids[id] = uid
			}
		}
	}
	g.waits.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	// A read of lateBatch orders at a time: 50,000 waiting buyers must not hold Redis in one.
	for chunk := range slices.Chunk(ids, lateBatch) {
		cctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
		vals, err := g.rc.HMGet(cctx, r.keys.Result, chunk...).Result()
		cancel()
		if err != nil {
			return // the next resync tries again
		}
		for i, v := range vals {
			s, ok := v.(string)
			if !ok || s == "" {
				continue
			}
			state, reason, _ := strings.Cut(s, " ")
			if st := (Status{State: state, OrderID: chunk[i], Reason: reason}); st.final() {
				g.waits.wake(r, uids[chunk[i]], st, &g.waits.resynced)
			}
		}
	}
}
