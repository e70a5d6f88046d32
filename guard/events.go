package guard

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"
)

// EventsChannel is the Redis pub/sub channel on which proxies tell each other what happened
// to a sale. Redis Cluster carries a PUBLISH to every node, so each proxy hears every event.
// A message is "<event> <sku> <instance>": a proxy has already applied its own events, and
// skips them when they come back, so that its own late "soldout" cannot undo the release or
// re-warm that followed it.
const EventsChannel = KeyPrefix + "events"

// Events.
const (
	eventWarm    = "warm"    // re-warmed: clear the flags
	eventRelease = "release" // units came back: clear the sold-out flag
	eventClose   = "close"   // closed: refuse locally
	eventSoldOut = "soldout" // sold out: answer locally
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

// listenEvents applies other proxies' events (and this one's) to the local flags until Close.
// go-redis resubscribes by itself after a connection or node is lost.
func (g *Guard) listenEvents(ctx context.Context) {
	sub := g.rc.Subscribe(ctx, EventsChannel)
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			g.apply(msg.Payload, g.opt.Now())
		}
	}
}

// apply changes the local flags for one event of another proxy.
func (g *Guard) apply(payload string, now time.Time) {
	event, rest, ok := strings.Cut(payload, " ")
	sku, from, _ := strings.Cut(rest, " ")
	if !ok || !ValidID([]byte(sku)) {
		g.log.Warn("ignoring a malformed sale event", zap.String("payload", payload))
		return
	}
	if from == g.opt.Instance {
		return
	}
	switch event {
	case eventWarm:
		g.versions.Delete(sku)
		g.flags.Clear(sku)
	case eventRelease:
		g.flags.Clear(sku)
	case eventClose:
		g.flags.SetClosed(sku, now)
	case eventSoldOut:
		g.flags.SetSoldOut(sku, now)
	default:
		g.log.Warn("ignoring an unknown sale event", zap.String("payload", payload))
	}
}
