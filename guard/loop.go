package guard

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Loop is the buy as an event loop's engine runs it (package proxy), from a parsed request
// to the buyer's reply bytes: Admit answers what the proxy can without Redis and admits the
// rest as Attempts; AppendCall writes a call of the attempts of one master; Settle reads its
// reply (each attempt's reply, or where to send it again); Fail answers an attempt whose call
// did not come back; Late takes what a call told too late, or nothing, and ends its attempts;
// Flush tees the orders sold since the last Flush. Every Attempt ends exactly once, in Settle
// (a step with a reply, or a Later step once its reply is made), Fail or Late; the engine
// never ends one itself.
//
// The nodes the calls go to are a separate concern (MasterOf, ReloadSlots, WaitCommand,
// WaitReply, CallTimeout on Guard). A Loop is its engine's alone: it reuses its buffers.
type Loop struct {
	g    *Guard
	outs []Outcome
	res  []Step
	sold []*Attempt
}

// Loop makes an engine's Loop.
func (g *Guard) Loop() *Loop { return &Loop{g: g} }

// Step is what the engine does with one attempt of a settled call.
type Step struct {
	// Reply is the buyer's answer, when neither Retry nor Later.
	Reply []byte
	// Retry: send the attempt again (a stale sale version, NOSCRIPT); to Addr if set (the slot
	// moved: MOVED; or, with Ask, is moving: ASKING first).
	Retry bool
	Addr  string
	Ask   bool
	// Later: the reply comes through Settle's later, on a goroutine not the engine's (the
	// order's Kafka acknowledgement with buy.reply_after=kafka; a split sale's donation).
	Later bool
	// Sold: the order waits for the next Flush.
	Sold bool
}

// ErrCallExpired is the cause Fail takes for a call Redis did not answer in time.
var ErrCallExpired = errors.New("call past its deadline")

// Admit counts a buy and answers it from admission and the flags (reply set), or refuses it,
// or admits it to Redis: an Attempt, with a copy of req.
func (l *Loop) Admit(req BuyRequest, now time.Time) (*Attempt, []byte) {
	if res, ok := l.g.Local(&req, now); ok {
		return nil, req.AppendReply(nil, res)
	}
	a, err := l.g.Start(&req)
	if err != nil {
		return nil, req.AppendReply(nil, BuyResult{Err: err})
	}
	return a, nil
}

// AppendCall appends one script call for the attempts of groups, whose keys one master owns:
// one group's alone (AppendCall), or many groups' (AppendManyCall; eval: as EVAL).
func (l *Loop) AppendCall(dst []byte, groups [][]*Attempt, eval bool) []byte {
	if len(groups) == 1 && !eval {
		return l.g.AppendCall(dst, groups[0])
	}
	return l.g.AppendManyCall(dst, groups, eval)
}

// Settle reads the reply of a call for as (round: the calls they have had before this one;
// replicated: the WAIT after the call, if any, counted its replicas, see SettleCall). Each
// attempt's Step says what to do; an attempt with a Reply has ended; a sold one's order goes
// to Kafka at the next Flush. later gets the reply of a Later step, once it is known. The
// steps are valid until the next Settle.
func (l *Loop) Settle(as []*Attempt, raw []byte, round int, replicated bool, later func(*Attempt, []byte)) []Step {
	l.outs = l.g.SettleCall(as, raw, round, replicated, l.outs[:0])
	l.res = l.res[:0]
	for i, o := range l.outs {
		a := as[i]
		s := Step{Retry: o.Retry, Addr: o.Addr, Ask: o.Ask}
		if a.noReplica == noReplicaKafka {
			o.Result = l.g.heldOnce(o.Result)
		}
		switch {
		case o.Retry:
		case o.Donate:
			s.Later = true
			l.g.Donate(a, func(res BuyResult) { l.g.Finish(a); later(a, a.req.AppendReply(nil, res)) })
		case o.Sold && (l.g.ReplyAfterKafka() || a.noReplica == noReplicaKafka):
			s.Later = true
			l.g.Tee(a, func(err error) {
				res := l.g.AfterKafka(a, err)
				if err == nil && a.noReplica == noReplicaKafka {
					l.g.stats.toldByKafka.Add(1)
				}
				reply := a.req.AppendReply(nil, res)
				l.g.Finish(a)
				later(a, reply)
			})
		default:
			if o.Sold {
				l.sold = append(l.sold, a)
				s.Sold = true
				if a.noReplica == noReplicaTell {
					l.g.stats.toldUnreplicated.Add(1)
				}
			}
			s.Reply = a.req.AppendReply(nil, o.Result)
			l.g.Finish(a)
		}
		l.res = append(l.res, s)
	}
	return l.res
}

// Fail answers an attempt whose call did not come back. err ErrCallExpired: Redis did not
// answer within buy.call_timeout (TimedOut), and the attempt lives on until Late takes the
// call's reply or failure. Else the call could not reach Redis, or its connection failed
// before the reply came (Unreached), and the attempt ends. Either way the script may have
// run: a retry by the buyer answers DUPLICATE with its order.
func (l *Loop) Fail(a *Attempt, err error) []byte {
	if errors.Is(err, ErrCallExpired) {
		return a.req.AppendReply(nil, l.g.TimedOut(a))
	}
	res := l.g.Unreached(a, err)
	l.g.Finish(a)
	return a.req.AppendReply(nil, res)
}

// Late ends attempts whose buyers were answered already (Fail, or the proxy shutting down):
// raw, if not nil, is the reply of their call that came after, and what it sold is teed
// (see Guard.Late).
func (l *Loop) Late(as []*Attempt, raw []byte, replicated bool) {
	if raw != nil {
		l.g.Late(as, raw, replicated)
	}
	for _, a := range as {
		l.g.Finish(a)
	}
}

// Flush hands the orders sold since the last Flush to Kafka, together.
func (l *Loop) Flush() {
	if len(l.sold) > 0 {
		l.g.TeeAll(l.sold)
		clear(l.sold)
		l.sold = l.sold[:0]
	}
}

// MasterOfTag is MasterOf for an engine's turn, which an event loop runs: from the slot map
// go-redis holds, never waiting for one to load (with none yet, at start or with the cluster
// unreachable, a load is started in the background and the buy is refused, not run).
func (g *Guard) MasterOfTag(tag string) (string, error) {
	m, err := g.MasterOf(noWait, tag)
	if err != nil {
		g.rc.ReloadState(context.Background()) // in the background; the buy is told UNAVAILABLE now
		return "", fmt.Errorf("the slot map is not loaded: %w", err)
	}
	return m, nil
}

// noWait is a context already done: go-redis answers from the slot map it holds, and loads
// none while an event loop waits (with none loaded, it would ask the cluster there and then,
// holding every client of the loop for as long as the cluster takes to answer, or not).
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// NoScript marks an attempt whose call Redis answered NOSCRIPT: its next call goes as EVAL,
// a call of its own (its Group says so).
func (a *Attempt) NoScript() { a.useEval = true }

// Request is the buy the attempt is for.
func (a *Attempt) Request() *BuyRequest { return &a.req }

// DetachedAttempt is an attempt of req that is no guard's: its call group is its SKU's, its
// tag the SKU. It is for the tests of an engine whose fake of Loop decides its attempts.
func DetachedAttempt(req BuyRequest) *Attempt { return &Attempt{req: req, tag: req.SKU} }
