package connect

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// Dialer dials TCP, sending an address its map names to the address it is mapped to
// (redis.address_map, kafka.address_map), and with TLS set, makes the connection a TLS one:
// the handshake is done before it is returned, within the same timeout and context. The name
// verified is TLS's ServerName, or else the host of the address asked for (the one a node
// announces, not the one the map sends it to).
type Dialer struct {
	Timeout time.Duration
	Map     map[string]string
	TLS     *tls.Config
	// Err, when set, fails every dial with it: TLS files that could not be read at start
	// (see RedisTLS, which a binary calls first to stop on it).
	Err error
}

// DialContext connects to addr, or to where d's map sends it.
func (d Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.Err != nil {
		return nil, d.Err
	}
	asked := addr
	if to, ok := d.Map[addr]; ok {
		addr = to
	}
	nd := net.Dialer{Timeout: d.Timeout}
	if d.TLS == nil {
		return nd.DialContext(ctx, network, addr)
	}
	cfg := d.TLS
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(asked); err == nil {
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
	}
	td := tls.Dialer{NetDialer: &nd, Config: cfg}
	return td.DialContext(ctx, network, addr)
}

// Dial is DialContext without a context, as Sarama's proxy dialer wants it.
func (d Dialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}
