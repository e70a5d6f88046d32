package router

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"net"
	"strconv"
	"strings"

	"seckill-proxy/upstream"
)

// The cluster facade: to a cluster-mode client the proxy is a one-node Redis Cluster that owns
// all 16,384 slots at its announced address, so that the client sends it every command, and
// the proxy routes each to the real node behind it (never passing on a MOVED or an ASK).
// READONLY, READWRITE and ASKING are accepted and change nothing.

// SetAnnounce sets the address that CLUSTER SLOTS, SHARDS and NODES give for the proxy:
// where its clients reach it (conf's announce, or its listen address).
func (r *Router) SetAnnounce(addr string) {
	if a := newAnnounce(addr); a != nil {
		r.announce.Store(a)
	}
}

// SetTLSAnnounce sets the address the facade gives clients that came in over TLS: the TLS
// listener's, so that a cluster-mode client's next connection is a TLS one too.
func (r *Router) SetTLSAnnounce(addr string) {
	if a := newAnnounce(addr); a != nil {
		r.tlsAnnounce.Store(a)
	}
}

// newAnnounce is the facade's node at addr (nil: not host:port).
func newAnnounce(addr string) *announce {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	p, _ := strconv.Atoi(port)
	sum := sha1.Sum([]byte(net.JoinHostPort(host, port)))
	return &announce{host: host, port: p, id: hex.EncodeToString(sum[:])}
}

// announce is the facade's one node.
type announce struct {
	host string
	port int
	id   string // 40 hex characters, stable for the address
}

func (r *Router) self(s *Session) *announce {
	if a := r.tlsAnnounce.Load(); a != nil && s != nil && s.TLS {
		return a
	}
	if a := r.announce.Load(); a != nil {
		return a
	}
	return &announce{host: "127.0.0.1", port: 6380, id: strings.Repeat("0", 40)}
}

// busPort is the cluster bus port Redis would give a node on port.
func busPort(port int) int {
	if port+10000 <= 65535 {
		return port + 10000
	}
	return 0
}

func cmdOK(context.Context, *Session, [][]byte) (Reply, error) { return OK, nil }

func (r *Router) cmdCluster(_ context.Context, s *Session, args [][]byte) (Reply, error) {
	sub := strings.ToLower(string(args[1]))
	wrongArgs := respError("ERR wrong number of arguments for 'cluster|" + sub + "' command")
	a := r.self(s)
	switch sub {
	case "slots":
		if len(args) != 2 {
			return nil, wrongArgs
		}
		node := Array{BulkString(a.host), Int(a.port), BulkString(a.id), Array{}}
		return Array{Array{Int(0), Int(16383), node}}, nil
	case "shards":
		if len(args) != 2 {
			return nil, wrongArgs
		}
		node := Fields("id", a.id, "port", a.port, "ip", a.host, "endpoint", a.host, "role", "master",
			"replication-offset", 0, "health", "online")
		return Array{Fields("slots", Array{Int(0), Int(16383)}, "nodes", Array{node})}, nil
	case "nodes":
		if len(args) != 2 {
			return nil, wrongArgs
		}
		addr := net.JoinHostPort(a.host, strconv.Itoa(a.port)) + "@" + strconv.Itoa(busPort(a.port))
		return BulkString(a.id + " " + addr + " myself,master - 0 0 1 connected 0-16383\n"), nil
	case "info":
		if len(args) != 2 {
			return nil, wrongArgs
		}
		return BulkString("cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n" +
			"cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:1\r\ncluster_size:1\r\n" +
			"cluster_current_epoch:1\r\ncluster_my_epoch:1\r\ncluster_stats_messages_sent:0\r\n" +
			"cluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n"), nil
	case "myid":
		if len(args) != 2 {
			return nil, wrongArgs
		}
		return BulkString(a.id), nil
	case "keyslot":
		if len(args) != 3 {
			return nil, wrongArgs
		}
		return Int(upstream.Slot(args[2])), nil
	case "help":
		return Array{
			SimpleString("CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
			SimpleString("INFO, MYID, NODES, SHARDS, SLOTS, KEYSLOT <key>: seckill-proxy answers as a one-node cluster that owns every slot."),
		}, nil
	}
	return nil, respError("ERR CLUSTER " + strings.ToUpper(sub) + " is not supported through seckill-proxy: it shows its clients a one-node cluster and routes every slot to the real one itself")
}
