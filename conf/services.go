package conf

import (
	"strings"
	"time"
)

// The services both binaries reach: the Redis Cluster, Kafka and MySQL.

// Redis configures the go-redis ClusterClient.
type Redis struct {
	// Mode is "cluster" (a Redis Cluster; the default) or "standalone" (one plain server, as
	// small shops and developers run; Addrs then holds exactly that server).
	Mode string `koanf:"mode"`
	// Addrs are the cluster's seed nodes, host:port.
	Addrs []string `koanf:"addrs"`
	// Username and Password log the proxy's own calls in (the SECKILL scripts, the sweeper,
	// the sink): a user that may write the sales' keys.
	Username string `koanf:"username"`
	Password string `koanf:"password"`
	// PassthroughUsername and PassthroughPassword log in every connection that carries
	// clients' commands: a Redis ACL user that may not write the sales' keys nor publish on
	// their events channel (see sale.PassthroughACL and scripts/redis-passthrough.acl). Redis
	// enforces it inside scripts, functions and transactions too. Empty: pass-through uses
	// Username, and the proxy refuses every script and function instead.
	PassthroughUsername string `koanf:"passthrough_username"`
	PassthroughPassword string `koanf:"passthrough_password"`
	// TLS to every node (Redis's tls-port), the nodes a cluster announces and redirects to
	// included.
	TLS TLS `koanf:"tls"`

	DialTimeout  time.Duration `koanf:"dial_timeout"`
	ReadTimeout  time.Duration `koanf:"read_timeout"`
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// PoolSize is the connection pool size per node. It must be at least the number of calls
	// in flight, or calls queue for a connection.
	PoolSize     int           `koanf:"pool_size"`
	MinIdleConns int           `koanf:"min_idle_conns"`
	PoolTimeout  time.Duration `koanf:"pool_timeout"`
	// StateReloadInterval is how often the client reloads the cluster's slot map. About a
	// second, or the client stays blind after a failover.
	StateReloadInterval time.Duration `koanf:"state_reload_interval"`
	MaxRedirects        int           `koanf:"max_redirects"`
	// PassthroughConns is how many shared connections carry pass-through commands to each
	// node; every client's commands are coalesced into them.
	PassthroughConns int `koanf:"passthrough_conns"`
	// SpareConns is how many connections to each node the proxy keeps dialled, logged in and
	// idle, for the commands that take a connection of their own (blocking commands,
	// transactions, WATCH): such a command then dials nothing in its path, and reaches Redis
	// before what other clients send after it. 0 dials each when it comes.
	SpareConns int `koanf:"spare_conns"`
	// OwnerLanes is how many connections each event loop (and the buy shell) may open to a
	// master for the buy scripts: a turn's calls go on one with no WAIT out, since Redis holds
	// whatever is written behind a WAIT until a replica acknowledges it. Opened as the rush
	// needs them; 1 is the single owner connection of earlier versions.
	OwnerLanes int `koanf:"owner_lanes"`
	// MaxOwnConns bounds the connections of their own that blocking commands, transactions
	// (WATCH or MULTI to EXEC) and subscribers hold through this proxy at once; one more is
	// refused with -BUSY before anything is dialled. 0: no bound.
	MaxOwnConns int `koanf:"max_own_conns"`
	// OwnConnsShare bounds the same on each master, as a share of the node's maxclients
	// (read once per node with the proxy's own user; Redis's 10,000 if it cannot be), so that
	// one proxy's blocked clients never fill a node that every sidecar and operator needs.
	// 0: no bound per master.
	OwnConnsShare float64 `koanf:"own_conns_share"`
	// KeysMax is the most keys one KEYS reply may name: KEYS is served as a walk of SCAN over
	// every master, and a pattern matching more gets an error (use SCAN). 0: no bound.
	KeysMax int `koanf:"keys_max"`
	// AdminAllow names commands that pass-through refuses (FLUSHALL, CONFIG, ...) but an admin
	// user may run all the same.
	AdminAllow []string `koanf:"admin_allow"`
	// AppScripts are the SHA1s of the scripts that app users may run (EVAL of a body with
	// that SHA1, EVALSHA, SCRIPT LOAD), besides the legacy stock scripts the proxy runs as
	// buys. An app user's other scripts, and its functions, are refused: a script that never
	// ends makes its master answer BUSY to every client and sale on it, and an app user may
	// not SCRIPT KILL. ["*"] lets app users run any script, and is refused unless
	// AppScriptsAnyUnsafe is set too. Admins run any script.
	AppScripts []string `koanf:"app_scripts"`
	// AppScriptsAnyUnsafe must be true for AppScripts to hold "*": it says that the operator
	// knows any app user may then freeze a master, or fill its memory, with one script.
	AppScriptsAnyUnsafe bool `koanf:"app_scripts_any_unsafe"`
	// AppScriptFuel is how many cost units (internal/luabound: a loop step or statement 1, a
	// Redis call 32, a match by its pattern) the loops and functions of an app user's script
	// that loops on a value (a while, a for to a number read from a key, recursion) may spend:
	// the proxy sends it rewritten to pay for each step and stop with an error once this is
	// spent. 0 refuses such scripts instead.
	AppScriptFuel int `koanf:"app_script_fuel"`
	// AppScriptBytes bounds what one run of an app user's script may ask Redis to keep or
	// allocate (its calls' arguments, SETRANGE and SETBIT offsets, the counts of SRANDMEMBER
	// and the like), and how far it may grow its Lua heap; past it the script stops with an
	// error. The meter checks it on every Redis call, loop step and function call.
	AppScriptBytes int `koanf:"app_script_bytes"`
	// AppScriptTime bounds how long one run of an app user's script may take, read from
	// Redis's clock at least every few thousand units of its work; past it the script stops
	// with an error, well before Redis's own busy threshold.
	AppScriptTime time.Duration `koanf:"app_script_time"`
	// EventLoops is how many epoll event loops serve the clients on Linux, each on a goroutine
	// (and so, with the cores to run them, a core) of its own and with one connection per Redis
	// node, as twemproxy does. 0 serves each client from a goroutine of its own (as off Linux).
	EventLoops int `koanf:"event_loops"`
	// CommandTimeout bounds one pass-through command: past it its caller gets UNAVAILABLE (a
	// command slower than this still runs in Redis, and nobody else's command fails for it). A
	// node that answers nothing for this long while commands wait is reconnected.
	CommandTimeout time.Duration `koanf:"command_timeout"`
	// AddressMap rewrites where nodes are dialled: entries "announced=dialled", both
	// host:port. A node the cluster announces as the first address (in CLUSTER SLOTS, MOVED,
	// ASK) is dialled at the second, for every connection the proxy and the sink make: for a
	// cluster behind NAT or port forwarding, or a fault injector such as toxiproxy in front of
	// each node. Addresses not listed are dialled as announced.
	AddressMap []string `koanf:"address_map"`
}

// Kafka configures the Sarama producer (the tee) and consumer group (the sink).
type Kafka struct {
	Brokers         []string `koanf:"brokers"`
	Topic           string   `koanf:"topic"`
	DeadLetterTopic string   `koanf:"dead_letter_topic"`
	ClientID        string   `koanf:"client_id"`
	Group           string   `koanf:"group"`
	// Version is the Kafka protocol version Sarama speaks, e.g. "3.6.0".
	Version string `koanf:"version"`
	// DialTimeout bounds connecting to a broker.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// Linger is how long the producer gathers orders into one produce request (Kafka's
	// linger.ms): 0 sends at once. A few milliseconds cut the broker's CPU per order several
	// times over under load; with buy.reply_after=kafka it adds up to that much to a buy.
	Linger time.Duration `koanf:"linger"`
	// SessionTimeout is the sink's consumer group session (Kafka's session.timeout.ms): a sink
	// killed without leaving holds its partitions this long before the group hands them to
	// another sink, which bounds the drain's delay after such a crash. Heartbeats go every
	// third of it.
	SessionTimeout time.Duration `koanf:"session_timeout"`
	// AddressMap rewrites where brokers are dialled, as redis.address_map does for Redis
	// nodes: a broker that metadata announces as "announced" is dialled at "dialled".
	AddressMap []string `koanf:"address_map"`
	// Partitions and ReplicationFactor are used when the sink creates a missing topic;
	// Partitions is also WARM's guess of the topic's partitions when Kafka does not say.
	// Production wants a replication factor of 3; the dev stack has one broker.
	Partitions        int `koanf:"partitions"`
	ReplicationFactor int `koanf:"replication_factor"`
	// TLS to every broker (Kafka's SSL or SASL_SSL listeners), and SASL's login.
	TLS  TLS  `koanf:"tls"`
	SASL SASL `koanf:"sasl"`
}

// MySQL configures the database the sink writes and WARM reads.
type MySQL struct {
	// DSN is a go-sql-driver/mysql data source name.
	DSN             string        `koanf:"dsn"`
	MaxOpenConns    int           `koanf:"max_open_conns"`
	MaxIdleConns    int           `koanf:"max_idle_conns"`
	ConnMaxLifetime time.Duration `koanf:"conn_max_lifetime"`
	// TLS to the server, its certificate verified (RDS's and Aurora's
	// require_secure_transport). The DSN's own tls= parameter is the other way; not both.
	TLS TLS `koanf:"tls"`
}

// AddressMap returns the "announced=dialled" entries of pairs as a map, nil if there are
// none. Validate has checked their form.
func AddressMap(pairs []string) map[string]string {
	if len(pairs) == 0 {
		return nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		from, to, _ := splitAddressPair(p)
		m[from] = to
	}
	return m
}

// splitAddressPair splits an "announced=dialled" entry, spaces trimmed; ok is false without
// an "=".
func splitAddressPair(p string) (from, to string, ok bool) {
	from, to, ok = strings.Cut(p, "=")
	return strings.TrimSpace(from), strings.TrimSpace(to), ok
}
