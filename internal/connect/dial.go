package connect

import (
	"context"
	"net"
	"time"
)

// Dialer dials TCP, sending an address its map names to the address it is mapped to
// (redis.address_map, kafka.address_map).
type Dialer struct {
	Timeout time.Duration
	Map     map[string]string
}

// DialContext connects to addr, or to where d's map sends it.
func (d Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if to, ok := d.Map[addr]; ok {
		addr = to
	}
	nd := net.Dialer{Timeout: d.Timeout}
	return nd.DialContext(ctx, network, addr)
}

// Dial is DialContext without a context, as Sarama's proxy dialer wants it.
func (d Dialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}
