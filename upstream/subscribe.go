package upstream

import (
	"context"
	"strings"

	"seckill-proxy/internal/resp"
)

// Subscriber is a client's subscriber-mode connection of its own to one Redis node: what the
// client sends goes there, and every message Redis pushes comes back raw. Redis Cluster
// carries a PUBLISH to every node, so SUBSCRIBE and PSUBSCRIBE may use any master; SSUBSCRIBE
// uses the master of its shard channels' slot.
type Subscriber struct{ c *conn }

// Subscribe opens the connection for a client's first (P|S)SUBSCRIBE.
func (c *Cluster) Subscribe(ctx context.Context, args [][]byte) (*Subscriber, error) {
	var addr string
	var err error
	if strings.EqualFold(string(args[0]), "ssubscribe") && len(args) > 1 {
		addr, err = c.masterAddr(ctx, args[1])
	} else {
		addr, err = c.anyMaster(ctx)
	}
	if err != nil {
		return nil, err
	}
	conn, err := c.node(addr).dial(ctx)
	if err != nil {
		return nil, err
	}
	return &Subscriber{c: conn}, nil
}

// Send writes one command.
func (s *Subscriber) Send(args [][]byte) error {
	_, err := s.c.nc.Write(appendCommand(nil, args))
	return err
}

// Next waits for the next reply or message, as raw RESP.
func (s *Subscriber) Next() ([]byte, error) { return resp.ReadReply(s.c.r) }

// Close closes the connection; Next then returns an error.
func (s *Subscriber) Close() { s.c.nc.Close() }
