package guard

import (
	"context"
	"strings"

	"go.uber.org/zap"

	"seckill-proxy/sale"
)

// EventsChannel is the Redis pub/sub channel on which proxies tell each other what happened
// to a sale. Redis Cluster carries a PUBLISH to every node, so each proxy hears every event.
// A message is "<event> <sku> <instance>": a proxy has already applied its own events, and
// skips them when they come back, so that its own late "soldout" cannot undo the release or
// re-warm that followed it.
const EventsChannel = sale.EventsChannel

// Events.
const (
	eventWarm    = "warm"    // re-warmed: clear the flags
	eventRelease = "release" // units came back: clear the sold-out flag
	eventClose   = "close"   // closed: refuse locally
	eventSoldOut = "soldout" // sold out: answer locally
	eventLimit   = "limit"   // the sale's rate changed: read it again
	eventDeny    = "deny"    // the deny list changed ("deny list"): read it again
	eventRetire  = "retire"  // over, drained and out of the set of sales: forget it
)

// signal publishes an event without holding up the caller; a lost event costs at most the
// re-probe interval, after which every flag lapses.
func (g *Guard) signal(event, sku string) {
	select {
	case g.events <- event + " " + sku + " " + g.opt.Instance:
	default:
		g.log.Warn("event queue full; other proxies learn of it by re-probing", zap.String("event", event), zap.String("sku", sku))
	}
}

// publishEvents sends queued events until Close.
func (g *Guard) publishEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case msg := <-g.events:
			pctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
			if err := g.rc.Publish(pctx, EventsChannel, msg).Err(); err != nil && ctx.Err() == nil {
				g.log.Warn("could not publish a sale event", zap.String("event", msg), zap.Error(err))
			}
			cancel()
		}
	}
}

// Subscribed says whether the subscription to the other proxies' sale events has been
// confirmed: a proxy just started may miss an event until then (which costs at most
// buy.sold_out_reprobe).
func (g *Guard) Subscribed() bool { return g.subscribed.Load() }

// listenEvents takes other proxies' events until Close. go-redis resubscribes by itself after
// a connection or node is lost.
func (g *Guard) listenEvents(ctx context.Context) {
	sub := g.rc.Subscribe(ctx, EventsChannel)
	defer sub.Close()
	// The first reply confirms the subscription: from then on no event is missed.
	if _, err := sub.Receive(ctx); err == nil {
		g.subscribed.Store(true)
	} else if ctx.Err() == nil {
		g.log.Warn("could not subscribe to the sale events yet; retrying", zap.Error(err))
	}
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			g.subscribed.Store(true)
			g.apply(ctx, msg.Payload)
		}
	}
}

// apply acts on one event of another proxy. An event is a hint, never a fact: one that would
// drop a flag (warm, release) costs at most a trip to Redis on the next buy; one that would set
// a flag (close, soldout) is believed only as far as the sale in Redis bears it out, so that a
// message published by anyone else changes nothing.
func (g *Guard) apply(ctx context.Context, payload string) {
	event, rest, ok := strings.Cut(payload, " ")
	sku, from, _ := strings.Cut(rest, " ")
	if !ok || !sale.ValidID([]byte(sku)) {
		g.stats.eventsIgnored.Add(1)
		g.log.Warn("ignoring a malformed sale event", zap.String("payload", payload))
		return
	}
	if from == g.opt.Instance {
		return
	}
	defer g.stats.events.Add(1) // after acting, so that a reader of the count sees the effect
	switch event {
	case eventWarm:
		g.learnSale(ctx, sku) // before the no-sale answer is forgotten: no gap between them
		g.versions.Delete(sku)
		g.clearFlag(sku)
		g.kickRate(sku)
	case eventRelease:
		g.clearFlag(sku)
	case eventLimit:
		g.kickRate(sku)
	case eventDeny:
		g.kickSync()
	case eventRetire:
		g.forgetIfRetired(ctx, sku)
	case eventClose, eventSoldOut:
		g.recheck(ctx, sku, payload)
	default:
		g.stats.eventsIgnored.Add(1)
		g.log.Warn("ignoring an unknown sale event", zap.String("payload", payload))
	}
}

// learnSale gives sku its counters if Redis says it has a sale (an event is a hint, never a
// fact): its buys then no longer spend admission.unknown_sku_rate, as a made-up SKU's do.
func (g *Guard) learnSale(ctx context.Context, sku string) {
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	if p, err := g.probe(ctx, sku); err == nil && p.state != "" {
		g.countersFor(sku)
	}
}

// recheck sets sku's flag to what its sale in Redis says now: closed, sold out, or neither.
func (g *Guard) recheck(ctx context.Context, sku, payload string) {
	gen := g.flags.Gen()
	ctx, cancel := context.WithTimeout(ctx, g.opt.Buy.CallTimeout)
	defer cancel()
	p, err := g.probe(ctx, sku)
	switch {
	case err != nil:
		g.stats.eventsIgnored.Add(1)
		g.log.Warn("could not check a sale event against Redis; ignoring it", zap.String("payload", payload), zap.Error(err))
	case p.state == sale.StateClosed:
		if err := g.fenced(ctx, p); err != nil {
			g.stats.eventsIgnored.Add(1)
			g.log.Info("a closed sale that no replica is known to hold yet; its buys keep going to Redis", zap.String("sku", sku), zap.Error(err))
			return
		}
		g.flags.SetClosed(sku, sale.StateClosed, g.opt.Now(), gen)
	case p.state == sale.StateOpen && p.stock <= 0:
		g.soldOut(sku)
	default:
		g.stats.eventsIgnored.Add(1)
		g.log.Info("a sale event that Redis does not bear out; ignoring it", zap.String("payload", payload),
			zap.String("state", p.state), zap.Int64("stock", p.stock))
	}
}
