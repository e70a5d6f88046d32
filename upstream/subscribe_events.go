package upstream

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"
)

// Keyspace and keyevent notifications come from every master: a subscriber's (P)SUBSCRIBE
// to their channels goes to a connection per master (see subscribe.go).

// subscribeEvents sends a (P)SUBSCRIBE to every events connection, and waits until each has
// confirmed every channel or pattern of it (the command timeout at most).
func (s *Subscriber) subscribeEvents(ctx context.Context, args [][]byte) error {
	events, err := s.eventConns(ctx)
	if err != nil {
		return err
	}
	waits := make([]*ackWait, len(events))
	for i, ec := range events {
		waits[i] = &ackWait{n: len(args) - 1, done: make(chan struct{})}
		ec.mu.Lock()
		ec.acks = append(ec.acks, waits[i])
		ec.mu.Unlock()
		if err := ec.send(args); err != nil {
			return err
		}
	}
	timeout := time.NewTimer(s.c.opt.Timeout)
	defer timeout.Stop()
	for _, w := range waits {
		select {
		case <-w.done:
		case <-s.done:
			return errSubscriberClosed
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return errors.New("a master did not confirm the subscription to its notifications")
		}
	}
	return nil
}

// eventConns opens, on first need, a connection to every master but the home, for the
// notifications that only their own subscribers get.
func (s *Subscriber) eventConns(ctx context.Context) ([]*subConn, error) {
	s.mu.Lock()
	if s.events != nil {
		defer s.mu.Unlock()
		return s.events, nil
	}
	s.mu.Unlock()
	ms, err := s.c.masters(ctx)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, s.c.opt.DialTimeout+s.c.opt.Timeout)
	defer cancel()
	events := []*subConn{}
	for _, m := range ms {
		if m == s.home.addr {
			continue
		}
		ec, err := s.open(dctx, m, subEvents)
		if err != nil {
			for _, ec := range events {
				ec.c.close()
			}
			return nil, err
		}
		events = append(events, ec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = events
	return events, nil
}

// notifyPrefixes start the channels of Redis's keyspace and keyevent notifications.
var notifyPrefixes = [...]string{"__keyspace@", "__keyevent@"}

// notifyChannel: a channel of keyspace or keyevent notifications.
func notifyChannel(ch []byte) bool {
	for _, p := range notifyPrefixes {
		if bytes.HasPrefix(ch, []byte(p)) {
			return true
		}
	}
	return false
}

// mayMatchNotify: a pattern that may match a notification channel (judged by its literal
// start; an early wildcard may match anything).
func mayMatchNotify(pattern []byte) bool {
	lit := pattern
	if i := bytes.IndexAny(pattern, `*?[\`); i >= 0 {
		lit = pattern[:i]
	}
	for _, p := range notifyPrefixes {
		if strings.HasPrefix(p, string(lit)) || bytes.HasPrefix(lit, []byte(p)) {
			return true
		}
	}
	return false
}
