//go:build !linux

package proxy

import (
	"context"
	"net"
)

// loop is an event loop, which only Linux has.
type loop struct{}

func (*loop) drain() {}
func (*loop) stop()  {}

func (*loop) turning(context.Context) error { return nil }

// serveLoop: without epoll every client is served by a goroutine of its own.
func (s *Server) serveLoop(net.Listener) (bool, error) { return false, nil }
