package conf

import (
	"net"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Unsafe lists what makes a valid configuration unfit to run: a proxy open to its network
// with protected_mode off (every client that reaches it is an admin), a secret still set
// to a placeholder such as the manifests' CHANGE-ME, and an admin token under MinAdminToken
// bytes. The command line refuses such a
// configuration, at -check-config, at start and at a reload.
func (c Config) Unsafe() []string {
	var u []string
	if c.Password == "" && len(c.Users) == 0 && !c.ProtectedMode && !loopbackOnly(c.Listen) {
		u = append(u, "no password, no users and protected_mode off on "+c.Listen+": every client that reaches it would be an admin (WARM, CLOSE, RELEASE, DENY); set users (SECKILL_USERS) or password, or listen on loopback")
	}
	secrets := []struct{ key, value string }{{"password", c.Password}, {"admin_token", c.AdminToken},
		{"redis.password", c.Redis.Password}, {"redis.passthrough_password", c.Redis.PassthroughPassword},
		{"mysql.dsn", dsnPassword(c.MySQL.DSN)}}
	for _, user := range c.Users {
		secrets = append(secrets, struct{ key, value string }{"users " + user.Name, user.Password})
	}
	for _, s := range secrets {
		if isPlaceholder(s.value) {
			u = append(u, s.key+": the secret is still a placeholder ("+strconv.Quote(s.value)+"); set a real one")
		}
	}
	if n := len(c.AdminToken); n > 0 && n < MinAdminToken && !isPlaceholder(c.AdminToken) {
		u = append(u, "admin_token: "+strconv.Itoa(n)+" bytes, below "+strconv.Itoa(MinAdminToken)+": the admin port answers anyone who guesses it; make one with openssl rand -hex 32")
	}
	return u
}

// isPlaceholder: s is a stand-in for a secret, as the shipped manifests' "CHANGE-ME".
func isPlaceholder(s string) bool {
	folded := strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "").Replace(s))
	return strings.Contains(folded, "changeme") || folded == "password" || folded == "secret"
}

// dsnPassword is the password of a go-sql-driver DSN, or "".
func dsnPassword(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return ""
	}
	return cfg.Passwd
}

// CertificateWarnings, set by a binary (to internal/tlsfiles' Warnings), reads the TLS files
// the configuration names for -check-config: one that cannot be read, or whose certificate
// expires within 14 days. conf reads no certificate itself.
var CertificateWarnings func(Config) []string

// Warnings lists what a valid configuration leaves open: a proxy that serves every client as
// an admin, admin ports reachable from the network without a token, and "bought" answered
// before a replica holds the order.
func (c Config) Warnings() []string {
	var w []string
	if CertificateWarnings != nil {
		w = append(w, CertificateWarnings(c)...)
	}
	if c.Buy.WaitReplicas > 0 && c.Buy.NoReplica == NoReplicaTell {
		w = append(w, "buy.no_replica tell: a buy on a master with no replica is told bought while one copy of it exists (the master, and the proxy's memory until Kafka has it): that master and its proxy lost together lose it; set kafka (the default)")
	}
	if c.Buy.WaitReplicas == 0 {
		w = append(w, "buy.wait_replicas 0: a buy is answered before any replica holds it, so a master paused or cut off past the node timeout turns some \"bought\" answers into rejected orders; set 1 (the default)")
	}
	w = append(w, c.offBounds()...)
	open := c.Password == "" && len(c.Users) == 0
	if open && !loopbackOnly(c.Listen) {
		if c.ProtectedMode {
			w = append(w, "no password and no users: clients from outside loopback on "+c.Listen+" are refused (protected_mode); set users (SECKILL_USERS) or password")
		}
	}
	if c.AdminToken == "" {
		for _, a := range []struct{ key, addr string }{{"admin_listen", c.AdminListen}, {"sink.admin_listen", c.Sink.AdminListen}} {
			if a.addr != "" && !loopbackOnly(a.addr) {
				w = append(w, a.key+" "+a.addr+" is reachable from the network without admin_token: /reload, pprof and the sale page answer loopback peers only")
			}
		}
	}
	return w
}

// offBounds are the settings whose value turns a bound off, or makes it mean nothing: each is
// valid (an operator may want it) and each is a warning, which -check-config -strict refuses.
func (c Config) offBounds() []string {
	var w []string
	off := func(ok bool, msg string) {
		if !ok {
			w = append(w, msg)
		}
	}
	off(c.Redis.KeysMax > 0, "redis.keys_max 0: KEYS may name every key of the cluster in one reply, as large as the keyspace")
	off(c.Redis.MaxOwnConns > 0, "redis.max_own_conns 0: blocking commands, transactions and subscribers may open connections to the nodes without bound, up to their maxclients")
	off(c.Admission.UnknownSKURate > 0, "admission.unknown_sku_rate 0: buys of made-up SKUs reach Redis without bound")
	off(c.Limits.ReplyBuffers > 0, "limits.reply_buffers 0: the replies clients leave unread, and those asked of Redis for them, have no bound")
	off(c.Buy.WaitReplicas <= maxSensibleReplicas, "buy.wait_replicas "+strconv.Itoa(c.Buy.WaitReplicas)+": more replicas than any master has; every buy then waits buy.wait_timeout and is told UNAVAILABLE")
	off(c.Limits.MaxClients <= maxSensibleClients, "limits.max_clients "+strconv.Itoa(c.Limits.MaxClients)+": more connections than a process can have descriptors for; the bound then holds nothing back")
	return w
}

// maxSensibleReplicas and maxSensibleClients: past them, a bound means nothing.
const (
	maxSensibleReplicas = 16
	maxSensibleClients  = 1 << 20
)

// loopbackOnly: addr listens on a loopback address only.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
