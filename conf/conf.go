// Package conf holds the one configuration that seckill-proxy and seckill-sink share: where
// they listen, how they reach the Redis Cluster, Kafka and MySQL, their timeouts and limits,
// and when a buy is answered.
//
// A Config is loaded in layers: Default(), then a YAML file, then SECKILL_* environment
// variables, then command-line flags. Every setting has an environment variable named after
// its path (redis.addrs -> SECKILL_REDIS_ADDRS) and, unless it is a secret, a flag of the same
// path (-redis.addrs). Validate checks every field and the fields against each other.
//
// conf does no I/O beyond reading the named file and the environment it is given.
package conf

import (
	"fmt"
	"strings"
	"time"
)

// ReplyAfter says when a buyer is answered.
const (
	// ReplyAfterLua answers as soon as the atomic Lua call succeeds; the Redis outbox carries
	// the order to Kafka.
	ReplyAfterLua = "lua"
	// ReplyAfterKafka answers only after Kafka has acknowledged the order.
	ReplyAfterKafka = "kafka"
)

// Log formats.
const (
	LogJSON    = "json"
	LogConsole = "console"
)

// Config is the whole configuration of both binaries. Its zero value is not valid: start
// from Default. A Config is a plain value; copy it freely, but do not change it while the
// pieces built from it run.
type Config struct {
	// Listen is the RESP address the proxy serves.
	Listen string `koanf:"listen"`
	// Announce is the host:port that the cluster facade (CLUSTER SLOTS, SHARDS, NODES) gives
	// cluster-mode clients for the proxy: where they reach it, such as the pod's address.
	// Empty: the listen address (127.0.0.1 for an unspecified host).
	Announce string `koanf:"announce"`
	// AdminListen is the admin HTTP address (metrics, health). Empty disables it.
	AdminListen string `koanf:"admin_listen"`
	// AdminToken is the credential of the admin HTTP ports' guarded paths (/reload, pprof,
	// the live sale page): "Authorization: Bearer <token>". Empty: those paths are served to
	// loopback peers only. Probes and /metrics are open either way.
	AdminToken string `koanf:"admin_token"`
	// ProtectedMode, as Redis's protected-mode: with no password and no users, clients from
	// outside loopback are refused with -DENIED. Off, such a proxy is open to its network.
	ProtectedMode bool `koanf:"protected_mode"`
	// Password, when set, is the default user's password (AUTH <password>): that user may
	// run every command, as with Redis's requirepass.
	Password string `koanf:"password"`
	// Users are named users for AUTH <user> <password>, each with a role: "app" (BUY, STATUS,
	// INFO and pass-through) or "admin" (also WARM, CLOSE, RELEASE and CHECK). From the file,
	// or SECKILL_USERS as "name:password:role,...", never from flags.
	Users []User `koanf:"users"`

	Log    Log    `koanf:"log"`
	Redis  Redis  `koanf:"redis"`
	Kafka  Kafka  `koanf:"kafka"`
	MySQL  MySQL  `koanf:"mysql"`
	Limits Limits `koanf:"limits"`
	Buy    Buy    `koanf:"buy"`
	// Admission decides which buys may go to Redis at all.
	Admission Admission `koanf:"admission"`
	Outbox    Outbox    `koanf:"outbox"`
	Sink      Sink      `koanf:"sink"`
	// Status configures the buyers who wait for their order's outcome (SECKILL.STATUS ...
	// WAIT, and the outcome channels).
	Status Status `koanf:"status"`
}

// Status configures the wait for an order's outcome: how long a buyer may wait, how many may
// wait at once on one proxy, and how often the waits are checked against the outcomes kept
// in Redis (the stream that wakes them is the fast path; this is the catch-up).
type Status struct {
	// MaxWait bounds SECKILL.STATUS ... WAIT <ms> (and WAIT 0, which waits this long) and an
	// outcome channel's wait for its outcome.
	MaxWait time.Duration `koanf:"max_wait"`
	// MaxWaiters is the most buyers waiting at once on this proxy; past it a wait is refused
	// with -BUSY, and the buyer polls.
	MaxWaiters int `koanf:"max_waiters"`
	// Resync is how often each sale with waiting buyers has their outcomes read from Redis
	// in one call, besides after any lost read of the sale's outcome stream: what wakes a
	// buyer whose outcome's stream entry was missed (a sink without the stream, a failover).
	Resync time.Duration `koanf:"resync"`
}

// Outbox configures the tee's clean-up and the sweeper that republishes what the tee missed.
type Outbox struct {
	// SweepInterval is how often each proxy looks for old outbox entries.
	SweepInterval time.Duration `koanf:"sweep_interval"`
	// SweepAge is how old an entry must be before the sweeper republishes it.
	SweepAge time.Duration `koanf:"sweep_age"`
	// LeaseTTL is how long one proxy holds a SKU's sweep lease, so that a hundred sidecars do
	// not all republish the same entries.
	LeaseTTL time.Duration `koanf:"lease_ttl"`
	// SweepBatch is the most entries one sweep of one SKU republishes.
	SweepBatch int `koanf:"sweep_batch"`
	// DeleteFlush is how long acknowledged entries wait to be deleted together.
	DeleteFlush time.Duration `koanf:"delete_flush"`
	// LateAfter is how long an order may go without an outcome from the sink before it is
	// late: CHECK lists it, and the late-order watch logs and counts it (no order stays "in
	// flight" forever, as under a proxy or sink on another topic).
	LateAfter time.Duration `koanf:"late_after"`
}

// Sink configures the Kafka to MySQL persister.
type Sink struct {
	// BatchSize is the most orders in one MySQL transaction.
	BatchSize int `koanf:"batch_size"`
	// BatchLinger is how long a batch waits to fill once it has one order.
	BatchLinger time.Duration `koanf:"batch_linger"`
	// RetryMin and RetryMax bound the backoff between attempts when MySQL fails.
	RetryMin time.Duration `koanf:"retry_min"`
	RetryMax time.Duration `koanf:"retry_max"`
	// AdminListen is the sink's admin HTTP address (/metrics, /livez, /readyz); empty
	// disables it.
	AdminListen string `koanf:"admin_listen"`
}

// Roles of users.
const (
	RoleApp   = "app"
	RoleAdmin = "admin"
)

// User is one named user.
type User struct {
	Name     string `koanf:"name"`
	Password string `koanf:"password"`
	Role     string `koanf:"role"`
}

// UnmarshalText reads a user from "name:password:role", the form SECKILL_USERS takes.
func (u *User) UnmarshalText(b []byte) error {
	parts := strings.Split(string(b), ":")
	if len(parts) != 3 {
		return fmt.Errorf("user %q: want name:password:role", strings.SplitN(string(b), ":", 2)[0])
	}
	u.Name, u.Password, u.Role = parts[0], parts[1], parts[2]
	return nil
}

// Log configures the zap logger.
type Log struct {
	// Format is "json" (the default) or "console".
	Format string `koanf:"format"`
	// Level is a zap level: debug, info, warn, error.
	Level string `koanf:"level"`
}

// Redis upstream modes.
const (
	ModeCluster    = "cluster"
	ModeStandalone = "standalone"
)

// DefaultPassthroughUser is the Redis ACL user that pass-through connections log in as, unless
// redis.passthrough_username says otherwise. The dev stack creates it on every node.
const DefaultPassthroughUser = "seckill-passthrough"

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
	// AdminAllow names commands that pass-through refuses (FLUSHALL, CONFIG, ...) but an admin
	// user may run all the same.
	AdminAllow []string `koanf:"admin_allow"`
	// AppScripts are the SHA1s of the scripts that app users may run (EVAL of a body with
	// that SHA1, EVALSHA, SCRIPT LOAD), besides the legacy stock scripts the proxy runs as
	// buys. An app user's other scripts, and its functions, are refused: a script that never
	// ends makes its master answer BUSY to every client and sale on it, and an app user may
	// not SCRIPT KILL. ["*"] lets app users run any script. Admins run any script.
	AppScripts []string `koanf:"app_scripts"`
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
}

// MySQL configures the database the sink writes and WARM reads.
type MySQL struct {
	// DSN is a go-sql-driver/mysql data source name.
	DSN             string        `koanf:"dsn"`
	MaxOpenConns    int           `koanf:"max_open_conns"`
	MaxIdleConns    int           `koanf:"max_idle_conns"`
	ConnMaxLifetime time.Duration `koanf:"conn_max_lifetime"`
}

// Limits bound what one proxy accepts.
type Limits struct {
	// MaxClients is the most client connections at once.
	MaxClients int `koanf:"max_clients"`
	// MaxPipeline is the most commands one client may have in one read.
	MaxPipeline int `koanf:"max_pipeline"`
	// MaxArgBytes is the largest single argument accepted.
	MaxArgBytes int `koanf:"max_arg_bytes"`
	// MaxInflight is the most SECKILL calls in flight to Redis at once.
	MaxInflight int `koanf:"max_inflight"`
}

// Admission configures the checks a buy passes before it may go to Redis (package
// guard/admit): a sale's shared rate (set per sale by SECKILL.WARM ... RATE and
// SECKILL.LIMIT), each buyer's attempts, the deny list, and how many buys of one SKU may wait.
type Admission struct {
	// BuyerAttempts is the most buys one uid may attempt per BuyerWindow on this proxy; 0: no
	// limit. Across N proxies a buyer may make up to N times as many.
	BuyerAttempts int `koanf:"buyer_attempts"`
	// BuyerWindow is the per-buyer limit's sliding window.
	BuyerWindow time.Duration `koanf:"buyer_window"`
	// BuyerTable is how many buyers the per-buyer limit counts at once (16 bytes each).
	BuyerTable int `koanf:"buyer_table"`
	// MaxWaitingPerSKU bounds the buys of one SKU that wait for Redis at once; past it a buy
	// is answered BUSY at once. 0: no bound but limits.max_inflight.
	MaxWaitingPerSKU int `koanf:"max_waiting_per_sku"`
	// LeaseShare is the part of a second's budget of a sale's rate that a proxy leases at a
	// time (at least one token, at most the burst).
	LeaseShare float64 `koanf:"lease_share"`
	// LeaseTTL is how long leased tokens may be spent; the rest go back to the sale's bucket.
	LeaseTTL time.Duration `koanf:"lease_ttl"`
	// SyncInterval is how often the proxy reads the sales' rates and the deny list from Redis,
	// besides the events that tell it of a change at once.
	SyncInterval time.Duration `koanf:"sync_interval"`
	// MaxDenied bounds the deny list; SECKILL.DENY refuses to grow it further.
	MaxDenied int `koanf:"max_denied"`
	// UnknownSKURate bounds, per second and proxy, the buys that go to Redis for a SKU this
	// proxy knows nothing of (no sale seen, no rate synced): what made-up SKUs may cost the
	// masters. Past it such a buy is LIMITED rate; 0: no bound. A SKU found to have no sale
	// is answered locally for buy.sold_out_reprobe anyway.
	UnknownSKURate int `koanf:"unknown_sku_rate"`
}

// Buy configures the buy path.
type Buy struct {
	// ReplyAfter is "lua" (answer after the atomic call; the default) or "kafka" (answer after
	// Kafka's acknowledgement).
	ReplyAfter string `koanf:"reply_after"`
	// CallTimeout bounds one call to Redis; past it the buyer gets -UNAVAILABLE.
	CallTimeout time.Duration `koanf:"call_timeout"`
	// WaitReplicas, when above 0, follows the script with WAIT on the same connection.
	WaitReplicas int `koanf:"wait_replicas"`
	// WaitTimeout is WAIT's timeout.
	WaitTimeout time.Duration `koanf:"wait_timeout"`
	// SoldOutReprobe is how long a local sold-out flag lasts before the next buy asks Redis
	// again, a backstop in case a re-warm signal is missed.
	SoldOutReprobe time.Duration `koanf:"sold_out_reprobe"`
	// SoldOutBuyers is the most buyers of a sold-out sale that the proxy keeps in memory, so
	// that a buyer who holds an order is told DUPLICATE from the local sold-out flag rather
	// than SOLDOUT (about 100 bytes each). Past it, the flag answers SOLDOUT to everyone.
	SoldOutBuyers int `koanf:"sold_out_buyers"`
	// PipelinesPerMaster is how many pipelines may be in flight to one master at once; the
	// buy scripts of all clients are coalesced into them. One gives the fewest round trips and
	// the biggest script calls, which is what a machine short of CPU wants; with WAIT on, or
	// with Redis far away, more keep the master busy while a pipeline travels.
	PipelinesPerMaster int `koanf:"pipelines_per_master"`
	// RebuyAfterRelease lets a buyer whose order was released buy again in the same sale.
	RebuyAfterRelease bool `koanf:"rebuy_after_release"`
	// CompatReplies answers BUY with the seeds' integers: 1 success, 0 sold out, -1 duplicate.
	CompatReplies bool `koanf:"compat_replies"`
	// LegacyScripts recognises the seeds' stock scripts (EVAL or EVALSHA on
	// seckill:stock:<sku>) and runs each call as a SECKILL.BUY answered with the script's
	// integer; an unrecognised script on such a key is refused.
	LegacyScripts bool `koanf:"legacy_scripts"`
	// Legacy are more legacy stock scripts to recognise besides the seeds' (YAML only).
	Legacy []LegacyScript `koanf:"legacy"`
	// LegacyUIDLess runs legacy scripts that name no buyer (the seeds' deduct, a uid_arg of
	// 0) as buys, each call a new buyer: one order per buyer and LIMIT cannot hold for them.
	// The deny list and the buyer's attempts then apply to the logged-in user, and a
	// connection makes at most LegacyUIDLessPerConn such calls. Off, they are refused.
	LegacyUIDLess        bool `koanf:"legacy_uidless"`
	LegacyUIDLessPerConn int  `koanf:"legacy_uidless_per_conn"`
}

// Default returns the configuration that the dev stack (scripts/devstack.sh) needs no
// changes to, apart from the addresses its env command prints.
func Default() Config {
	return Config{
		Listen:        "127.0.0.1:6380",
		AdminListen:   "127.0.0.1:6381",
		ProtectedMode: true,
		Users:         []User{},
		Log:           Log{Format: LogJSON, Level: "info"},
		Redis: Redis{
			Mode:                ModeCluster,
			PassthroughUsername: DefaultPassthroughUser,
			Addrs:               []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"},
			DialTimeout:         time.Second,
			ReadTimeout:         500 * time.Millisecond,
			WriteTimeout:        500 * time.Millisecond,
			PoolSize:            256,
			MinIdleConns:        8,
			PoolTimeout:         time.Second,
			StateReloadInterval: time.Second,
			MaxRedirects:        8,
			PassthroughConns:    2,
			SpareConns:          2,
			AdminAllow:          []string{},
			AppScripts:          []string{},
			EventLoops:          1,
			CommandTimeout:      5 * time.Second,
			AddressMap:          []string{},
		},
		Kafka: Kafka{
			Brokers:           []string{"127.0.0.1:9092"},
			Topic:             "seckill.orders",
			DeadLetterTopic:   "seckill.orders.dlq",
			ClientID:          "seckill-proxy",
			Group:             "seckill-sink",
			Version:           "3.6.0",
			DialTimeout:       3 * time.Second,
			Linger:            5 * time.Millisecond,
			SessionTimeout:    10 * time.Second,
			AddressMap:        []string{},
			Partitions:        6,
			ReplicationFactor: 1,
		},
		MySQL: MySQL{
			DSN:             "root@tcp(127.0.0.1:3306)/seckill?parseTime=true",
			MaxOpenConns:    32,
			MaxIdleConns:    32,
			ConnMaxLifetime: 5 * time.Minute,
		},
		Limits: Limits{
			MaxClients:  10000,
			MaxPipeline: 1024,
			MaxArgBytes: 512 << 20,
			MaxInflight: 4096,
		},
		Admission: Admission{
			BuyerAttempts:    0,
			BuyerWindow:      time.Second,
			BuyerTable:       1 << 17,
			MaxWaitingPerSKU: 2048,
			LeaseShare:       0.05,
			LeaseTTL:         time.Second,
			SyncInterval:     500 * time.Millisecond,
			MaxDenied:        1000000,
			UnknownSKURate:   1000,
		},
		Outbox: Outbox{
			SweepInterval: time.Second,
			SweepAge:      3 * time.Second,
			LeaseTTL:      3 * time.Second,
			SweepBatch:    1000,
			DeleteFlush:   10 * time.Millisecond,
			LateAfter:     time.Minute,
		},
		Status: Status{
			MaxWait:    time.Minute,
			MaxWaiters: 50000,
			Resync:     5 * time.Second,
		},
		Sink: Sink{
			BatchSize:   1000,
			BatchLinger: 5 * time.Millisecond,
			RetryMin:    100 * time.Millisecond,
			RetryMax:    5 * time.Second,
			AdminListen: "127.0.0.1:6382",
		},
		Buy: Buy{
			ReplyAfter:           ReplyAfterLua,
			CallTimeout:          time.Second,
			WaitReplicas:         0,
			WaitTimeout:          10 * time.Millisecond,
			SoldOutReprobe:       2 * time.Second,
			SoldOutBuyers:        100000,
			PipelinesPerMaster:   1,
			LegacyScripts:        true,
			Legacy:               []LegacyScript{},
			LegacyUIDLessPerConn: 1000,
		},
	}
}

// FieldError is a validation error: the field's path, the bad value and what is wrong.
type FieldError struct {
	Field  string
	Value  any
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("config: %s=%v: %s", e.Field, e.Value, e.Reason)
}

// LegacyScript is a service's own stock script that the proxy runs as a SECKILL.BUY (with
// buy.legacy_scripts): given by its body (recognised whatever its comments and whitespace)
// or its SHA1, with where its SKU, uid and quantity are, and what it answers.
type LegacyScript struct {
	Name string `koanf:"name"`
	Body string `koanf:"body"`
	SHA1 string `koanf:"sha1"`
	// StockKey is KEYS[1]'s pattern, with {sku} where the SKU is: "seckill:stock:{sku}".
	StockKey string `koanf:"stock_key"`
	// Keys is how many keys the script takes; UIDArg and QtyArg are 1-based ARGV positions
	// (UIDArg 0: no buyer, every call a new one).
	Keys    int           `koanf:"keys"`
	UIDArg  int           `koanf:"uid_arg"`
	QtyArg  int           `koanf:"qty_arg"`
	Replies LegacyReplies `koanf:"replies"`
}

// LegacyReplies are the integers a legacy stock script answers.
type LegacyReplies struct {
	Success   int64 `koanf:"success"`
	SoldOut   int64 `koanf:"sold_out"`
	Duplicate int64 `koanf:"duplicate"`
	NoSale    int64 `koanf:"no_sale"`
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
