//go:build !linux

package proxy

import "net"

// loopGroup is the event loops, which only Linux has.
type loopGroup struct{}

func (*loopGroup) drain() {}
func (*loopGroup) stop()  {}

// serveLoop: without epoll every upstream is served by redcon.
func (s *Server) serveLoop(net.Listener) (bool, error) { return false, nil }
