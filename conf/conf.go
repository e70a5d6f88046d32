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
	// TLSListen, when set, is a second RESP address, served over TLS with tls's certificate
	// (beside listen, which a sidecar may keep on loopback for services that speak no TLS).
	TLSListen string `koanf:"tls_listen"`
	// TLS is tls_listen's certificate, and its clients' CAs for mutual TLS.
	TLS ServerTLS `koanf:"tls"`
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
	// AdminTLS, when its certificate is set, serves the admin ports of both binaries
	// (admin_listen, sink.admin_listen) over HTTPS: the token is a bearer secret.
	AdminTLS ServerTLS `koanf:"admin_tls"`
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

// The values of buy.no_replica.
const (
	NoReplicaKafka  = "kafka"
	NoReplicaRefuse = "refuse"
	NoReplicaTell   = "tell"
)

// WaitFor is the WAIT timeout in force: WaitTimeout, or half of CallTimeout when it is 0,
// in whole milliseconds and at least 1 (Redis's WAIT counts milliseconds, and WAIT n 0 waits
// for ever: a CallTimeout under 2 ms once made half of it 0).
func (b Buy) WaitFor() time.Duration {
	d := b.CallTimeout / 2
	if b.WaitTimeout > 0 {
		d = b.WaitTimeout
	}
	return max(d.Truncate(time.Millisecond), time.Millisecond)
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
	// Nice is the nice value (0-19) the sink runs at: its work may wait while the answers of a
	// sale may not, on a machine it shares with the proxy, Redis or Kafka. 0 leaves it as
	// started.
	Nice int `koanf:"nice"`
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

// Limits bound what one proxy accepts.
type Limits struct {
	// MaxClients is the most client connections at once.
	MaxClients int `koanf:"max_clients"`
	// MaxPipeline is the most commands one client may have in one read.
	MaxPipeline int `koanf:"max_pipeline"`
	// MaxArgBytes is the largest single argument accepted.
	MaxArgBytes int `koanf:"max_arg_bytes"`
	// MaxAllocBytes is the most one command may make Redis allocate by its arguments, beyond
	// the arguments themselves: SETRANGE and SETBIT offsets, BITFIELD's, and the negative
	// counts of SRANDMEMBER, ZRANDMEMBER and HRANDFIELD (64 bytes an element). Past it the
	// command is refused.
	MaxAllocBytes int `koanf:"max_alloc_bytes"`
	// MaxChannelBytes bounds the bytes of the channel and pattern names one connection may
	// hold subscribed at once (and name in one command): past it the SUBSCRIBE is refused.
	MaxChannelBytes int `koanf:"max_channel_bytes"`
	// MaxInflight is the most SECKILL calls in flight to Redis at once.
	MaxInflight int `koanf:"max_inflight"`
	// OutcomeChannelsPerConn is the most outcome channels (seckill:outcome:<sku>/<uid>) one
	// connection may hold; past it a SUBSCRIBE of one more gets -BUSY for that channel.
	OutcomeChannelsPerConn int `koanf:"outcome_channels_per_conn"`
	// OutcomeChannels is the most outcome channels all the connections of this proxy may
	// hold at once.
	OutcomeChannels int `koanf:"outcome_channels"`
	// ClientShare is the share of OutcomeChannels, and of status.max_waiters, that one user
	// and one source address may hold each, so that no single one takes them all.
	ClientShare float64 `koanf:"client_share"`
	// ReplyBuffers bounds the replies all clients have not read yet: past it, a client whose
	// socket is full and that holds more than ReplyBufferFloor of them is disconnected, as
	// Redis's client-output-buffer-limit does. 0: no bound.
	ReplyBuffers int `koanf:"reply_buffers"`
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
	// SyncInterval is how often the proxy reads the deny list's version, and the rates of the
	// sales it answered buys of in the last 30 s, from Redis, besides the events that tell it
	// of a change at once (every sale's rate is read once at start).
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
	// WaitReplicas, when above 0, follows the script with WAIT on the same connection: a buy
	// is told bought only once this many replicas hold it (fewer on a master with fewer in
	// the cluster's view; none on one with none). A WAIT that comes back short answers the
	// call's buys UNAVAILABLE, the outcome not known, and tees nothing (guard/replicawait.go).
	// 0 tells a buy bought as soon as its master has it: a failover, or a master paused or cut
	// off, may then take back orders that buyers were told of. The sink holds the outcomes it
	// writes back to the same count (sink/outcomes.go).
	WaitReplicas int `koanf:"wait_replicas"`
	// WaitTimeout is WAIT's timeout: longer than a replica takes to acknowledge on a busy
	// machine, since a WAIT that times out without a fault tells buyers UNAVAILABLE, and below
	// CallTimeout. 0: half of CallTimeout (see WaitFor).
	WaitTimeout time.Duration `koanf:"wait_timeout"`
	// NoReplica is what a buy on a master with no online replica gets, with WaitReplicas above
	// 0: "kafka" (the default) answers it only once Kafka (acks=all) holds its order, the second
	// copy there being none in Redis; "refuse" answers UNAVAILABLE until a replica is back;
	// "tell" answers as soon as the master has it (one copy, in the master and the proxy's
	// memory, until Kafka has it).
	NoReplica string `koanf:"no_replica"`
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
			OwnerLanes:          8,
			MaxOwnConns:         1000,
			OwnConnsShare:       0.1,
			KeysMax:             1000000,
			AdminAllow:          []string{},
			AppScripts:          []string{},
			AppScriptFuel:       1 << 22,
			AppScriptBytes:      32 << 20,
			AppScriptTime:       500 * time.Millisecond,
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
			MaxClients:      10000,
			MaxPipeline:     1024,
			MaxArgBytes:     512 << 20,
			MaxAllocBytes:   32 << 20,
			MaxChannelBytes: 1 << 20,
			ReplyBuffers:    32 << 20,
			MaxInflight:     4096,
			// An outcome channel costs about 300 bytes held, and a waiter while its order
			// is pending (status.max_waiters bounds those): 100,000 stay within tens of
			// MiB of a 256 MiB sidecar.
			OutcomeChannelsPerConn: 1000,
			OutcomeChannels:        100000,
			ClientShare:            0.25,
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
			Nice:        10,
		},
		Buy: Buy{
			ReplyAfter:           ReplyAfterLua,
			CallTimeout:          time.Second,
			WaitReplicas:         1,
			WaitTimeout:          0,
			NoReplica:            NoReplicaKafka,
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

// ReplyBufferFloor is the unread replies a client may hold whatever limits.reply_buffers says:
// what a socket that is read at all holds in passing.
const ReplyBufferFloor = 256 << 10
