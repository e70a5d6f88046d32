package app

import (
	"net"

	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/internal/tlsfiles"
)

// serveTLS opens tls_listen, if set, and serves it (proxy.Server.ServeTLS); the cluster
// facade gives its clients the TLS address: announce's host, if set, with the TLS port.
func (p *Proxy) serveTLS(cfg conf.Config, log *zap.Logger) error {
	if cfg.TLSListen == "" {
		return nil
	}
	tc, err := tlsfiles.Server("tls", cfg.TLS, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.TLSListen)
	if err != nil {
		return err
	}
	p.TLSAddr = ln.Addr().String()
	announce := p.TLSAddr
	if cfg.Announce != "" {
		if host, _, err := net.SplitHostPort(cfg.Announce); err == nil {
			_, port, _ := net.SplitHostPort(p.TLSAddr)
			announce = net.JoinHostPort(host, port)
		}
	}
	p.Router.SetTLSAnnounce(announce)
	go func() {
		if err := p.Server.ServeTLS(ln, tc); err != nil {
			log.Error("the TLS listener stopped", zap.Error(err))
		}
	}()
	return nil
}
