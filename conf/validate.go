package conf

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap/zapcore"
)

// Validate checks every field and the fields against each other. It returns all problems
// at once, joined; each is a *FieldError naming the field and the bad value.
func (c *Config) Validate() error {
	var v validator
	v.checkListeners(c)
	v.checkLogAndRedis(c)
	v.checkKafka(c)
	v.checkMysql(c)
	v.checkLimits(c)
	v.checkAdmission(c)
	v.checkBuy(c)
	v.checkLegacy(c)
	v.checkOutbox(c)
	v.checkSink(c)
	v.checkTransport(c)
	return errors.Join(v.errs...)
}

// checkListeners checks the listen addresses and the users.
func (v *validator) checkListeners(c *Config) {
	v.hostPort("listen", c.Listen, false)
	v.hostPort("admin_listen", c.AdminListen, true)
	v.hostPort("announce", c.Announce, true)
	v.hostPort("sink.admin_listen", c.Sink.AdminListen, true)

	seen := map[string]bool{}
	for i, u := range c.Users {
		field := fmt.Sprintf("users[%d]", i)
		switch {
		case u.Name == "" || u.Name == "default" || strings.ContainsAny(u.Name, " :,"):
			v.fail(field+".name", strconv.Quote(u.Name), `must be non-empty, not "default", without spaces, ':' or ','`)
		case seen[u.Name]:
			v.fail(field+".name", strconv.Quote(u.Name), "given twice")
		}
		seen[u.Name] = true
		if u.Password == "" {
			v.fail(field+".password", `""`, "empty")
		}
		v.oneOf(field+".role", u.Role, RoleApp, RoleAdmin)
	}
}

// checkLogAndRedis checks the log and Redis.
func (v *validator) checkLogAndRedis(c *Config) {
	v.oneOf("log.format", c.Log.Format, LogJSON, LogConsole)
	if _, err := zapcore.ParseLevel(c.Log.Level); err != nil {
		v.fail("log.level", c.Log.Level, "not a log level (debug, info, warn, error)")
	}

	v.oneOf("redis.mode", c.Redis.Mode, ModeCluster, ModeStandalone)
	v.addrs("redis.addrs", c.Redis.Addrs)
	v.addressMap("redis.address_map", c.Redis.AddressMap)
	if c.Redis.Mode == ModeStandalone && len(c.Redis.Addrs) != 1 {
		v.fail("redis.addrs", c.Redis.Addrs, "standalone mode takes exactly one address")
	}
	v.between("redis.dial_timeout", c.Redis.DialTimeout, time.Millisecond, time.Minute)
	v.between("redis.read_timeout", c.Redis.ReadTimeout, time.Millisecond, time.Minute)
	v.between("redis.write_timeout", c.Redis.WriteTimeout, time.Millisecond, time.Minute)
	v.between("redis.pool_timeout", c.Redis.PoolTimeout, time.Millisecond, time.Minute)
	v.atLeast("redis.pool_size", c.Redis.PoolSize, 1)
	v.atLeast("redis.min_idle_conns", c.Redis.MinIdleConns, 0)
	if c.Redis.MinIdleConns > c.Redis.PoolSize {
		v.fail("redis.min_idle_conns", c.Redis.MinIdleConns, "above redis.pool_size "+strconv.Itoa(c.Redis.PoolSize))
	}
	v.between("redis.state_reload_interval", c.Redis.StateReloadInterval, 100*time.Millisecond, time.Minute)
	v.atLeast("redis.max_redirects", c.Redis.MaxRedirects, 1)
	v.atLeast("redis.passthrough_conns", c.Redis.PassthroughConns, 1)
	if c.Redis.OwnerLanes < 1 || c.Redis.OwnerLanes > 64 {
		v.fail("redis.owner_lanes", c.Redis.OwnerLanes, "must be from 1 to 64")
	}
	if c.Redis.SpareConns < 0 || c.Redis.SpareConns > 64 {
		v.fail("redis.spare_conns", c.Redis.SpareConns, "must be from 0 to 64")
	}
	v.atLeast("redis.max_own_conns", c.Redis.MaxOwnConns, 0)
	if !(c.Redis.OwnConnsShare >= 0 && c.Redis.OwnConnsShare <= 1) { // NaN too
		v.fail("redis.own_conns_share", c.Redis.OwnConnsShare, "must be from 0 (no bound per master) to 1")
	}
	v.atLeast("redis.keys_max", c.Redis.KeysMax, 0)
	if c.Redis.EventLoops < 0 || c.Redis.EventLoops > 64 {
		v.fail("redis.event_loops", c.Redis.EventLoops, "must be from 0 (a goroutine per client) to 64")
	}
	v.between("redis.command_timeout", c.Redis.CommandTimeout, time.Millisecond, time.Minute)
}

// checkKafka checks Kafka.
func (v *validator) checkKafka(c *Config) {
	v.addrs("kafka.brokers", c.Kafka.Brokers)
	v.addressMap("kafka.address_map", c.Kafka.AddressMap)
	v.nonEmpty("kafka.topic", c.Kafka.Topic)
	v.nonEmpty("kafka.dead_letter_topic", c.Kafka.DeadLetterTopic)
	if c.Kafka.Topic != "" && c.Kafka.Topic == c.Kafka.DeadLetterTopic {
		v.fail("kafka.dead_letter_topic", c.Kafka.DeadLetterTopic, "must differ from kafka.topic")
	}
	v.nonEmpty("kafka.client_id", c.Kafka.ClientID)
	v.nonEmpty("kafka.group", c.Kafka.Group)
	if kv, err := sarama.ParseKafkaVersion(c.Kafka.Version); err != nil {
		v.fail("kafka.version", c.Kafka.Version, err.Error())
	} else if !kv.IsAtLeast(sarama.V2_1_0_0) {
		v.fail("kafka.version", c.Kafka.Version, "below 2.1.0, which the idempotent producer and Kafka 4 need")
	}
	v.between("kafka.dial_timeout", c.Kafka.DialTimeout, time.Millisecond, time.Minute)
	v.between("kafka.linger", c.Kafka.Linger, 0, time.Second)
	// Kafka's brokers accept sessions within group.min/max.session.timeout.ms (6 s, 30 min).
	v.between("kafka.session_timeout", c.Kafka.SessionTimeout, 6*time.Second, 30*time.Minute)
	v.atLeast("kafka.partitions", c.Kafka.Partitions, 1)
	v.atLeast("kafka.replication_factor", c.Kafka.ReplicationFactor, 1)
}

// checkMysql checks MySQL.
func (v *validator) checkMysql(c *Config) {
	if c.MySQL.DSN == "" {
		v.fail("mysql.dsn", "", "empty")
	} else if _, err := mysql.ParseDSN(c.MySQL.DSN); err != nil {
		v.fail("mysql.dsn", MaskDSN(c.MySQL.DSN), err.Error())
	}
	v.atLeast("mysql.max_open_conns", c.MySQL.MaxOpenConns, 1)
	v.atLeast("mysql.max_idle_conns", c.MySQL.MaxIdleConns, 0)
	v.between("mysql.conn_max_lifetime", c.MySQL.ConnMaxLifetime, time.Second, 24*time.Hour)
}

// checkLimits checks the limits.
func (v *validator) checkLimits(c *Config) {
	v.atLeast("limits.max_clients", c.Limits.MaxClients, 1)
	v.atLeast("limits.max_pipeline", c.Limits.MaxPipeline, 1)
	v.atLeast("limits.max_arg_bytes", c.Limits.MaxArgBytes, 64)
	if n := c.Limits.MaxChannelBytes; n < 1<<10 || n > 64<<20 {
		v.fail("limits.max_channel_bytes", n, "must be from 1 KiB to 64 MiB: the channel names one connection may hold subscribed")
	}
	if n := c.Limits.MaxAllocBytes; n < 1<<20 || n > 1<<30 {
		v.fail("limits.max_alloc_bytes", n, "must be from 1 MiB to 1 GiB: what one command may make its master allocate")
	}
	v.atLeast("limits.max_inflight", c.Limits.MaxInflight, 1)
	if n := c.Limits.ReplyBuffers; n != 0 && n < 4*ReplyBufferFloor {
		v.fail("limits.reply_buffers", n, "must be 0 (no bound) or at least 1MiB")
	}
	v.atLeast("limits.outcome_channels_per_conn", c.Limits.OutcomeChannelsPerConn, 1)
	v.atLeast("limits.outcome_channels", c.Limits.OutcomeChannels, 1)
	if s := c.Limits.ClientShare; !(s > 0 && s <= 1) {
		v.fail("limits.client_share", s, "must be above 0 and at most 1")
	}
	if c.Limits.MaxInflight > c.Redis.PoolSize*len(c.Redis.Addrs)*64 {
		v.fail("limits.max_inflight", c.Limits.MaxInflight, "far above what redis.pool_size can carry")
	}
}

// checkAdmission checks admission.
func (v *validator) checkAdmission(c *Config) {
	if a := c.Admission; a.BuyerAttempts < 0 || a.BuyerAttempts > 65535 {
		v.fail("admission.buyer_attempts", a.BuyerAttempts, "must be from 0 (no limit) to 65535")
	}
	v.between("admission.buyer_window", c.Admission.BuyerWindow, 10*time.Millisecond, time.Hour)
	if a := c.Admission; a.BuyerTable < 1024 || a.BuyerTable > 1<<26 {
		v.fail("admission.buyer_table", a.BuyerTable, "must be from 1024 to 67108864 buyers")
	}
	v.atLeast("admission.max_waiting_per_sku", c.Admission.MaxWaitingPerSKU, 0)
	if a := c.Admission; !(a.LeaseShare > 0 && a.LeaseShare <= 1) {
		v.fail("admission.lease_share", a.LeaseShare, "must be above 0 and at most 1")
	}
	v.between("admission.lease_ttl", c.Admission.LeaseTTL, 100*time.Millisecond, time.Minute)
	v.between("admission.sync_interval", c.Admission.SyncInterval, 50*time.Millisecond, 10*time.Second)
	v.atLeast("admission.max_denied", c.Admission.MaxDenied, 1)
	v.atLeast("admission.unknown_sku_rate", c.Admission.UnknownSKURate, 0)
}

// checkBuy checks the buy and the application scripts.
func (v *validator) checkBuy(c *Config) {
	v.oneOf("buy.reply_after", c.Buy.ReplyAfter, ReplyAfterLua, ReplyAfterKafka)
	v.between("buy.call_timeout", c.Buy.CallTimeout, time.Millisecond, time.Minute)
	v.atLeast("buy.wait_replicas", c.Buy.WaitReplicas, 0)
	if c.Buy.WaitReplicas > 0 {
		if c.Buy.WaitTimeout < 0 {
			v.fail("buy.wait_timeout", c.Buy.WaitTimeout, "must be 0 (half of buy.call_timeout) or more")
		}
		if c.Buy.WaitTimeout > 0 && c.Buy.WaitTimeout < time.Millisecond {
			v.fail("buy.wait_timeout", c.Buy.WaitTimeout, "must be 0 or at least 1ms: Redis's WAIT counts whole milliseconds, and WAIT n 0 waits for ever")
		}
		if c.Buy.WaitTimeout >= c.Buy.CallTimeout {
			v.fail("buy.wait_timeout", c.Buy.WaitTimeout, "must be below buy.call_timeout "+c.Buy.CallTimeout.String())
		}
	}
	switch c.Buy.NoReplica {
	case NoReplicaKafka, NoReplicaRefuse, NoReplicaTell:
	default:
		v.fail("buy.no_replica", c.Buy.NoReplica, "must be kafka, refuse or tell")
	}
	v.between("buy.sold_out_reprobe", c.Buy.SoldOutReprobe, time.Millisecond, time.Hour)
	v.atLeast("buy.sold_out_buyers", c.Buy.SoldOutBuyers, 0)
	v.atLeast("buy.legacy_uidless_per_conn", c.Buy.LegacyUIDLessPerConn, 1)
	v.atLeast("redis.app_script_fuel", c.Redis.AppScriptFuel, 0)
	if c.Redis.AppScriptFuel > MaxAppScriptFuel {
		v.fail("redis.app_script_fuel", c.Redis.AppScriptFuel, "must be at most "+strconv.Itoa(MaxAppScriptFuel)+" units, the scripts' cost budget: a master running a script answers BUSY to every other client")
	}
	if n := c.Redis.AppScriptBytes; n < 1<<20 || n > 1<<30 {
		v.fail("redis.app_script_bytes", n, "must be from 1 MiB to 1 GiB: what one app user's script may ask its master to keep, and grow its Lua heap by")
	}
	v.between("redis.app_script_time", c.Redis.AppScriptTime, 10*time.Millisecond, 5*time.Second)
	for i, s := range c.Redis.AppScripts {
		switch {
		case s == "*" && !c.Redis.AppScriptsAnyUnsafe:
			v.fail("redis.app_scripts["+strconv.Itoa(i)+"]", s, `lets app users run any script, which can freeze a master or fill its memory; set redis.app_scripts_any_unsafe: true as well to mean it`)
		case s != "*" && !isSHA1(s):
			v.fail("redis.app_scripts["+strconv.Itoa(i)+"]", s, `not 40 hex digits, nor "*"`)
		}
	}
}

// checkLegacy checks the legacy scripts and the buy pipelines.
func (v *validator) checkLegacy(c *Config) {
	for i, l := range c.Buy.Legacy {
		field := "buy.legacy[" + strconv.Itoa(i) + "]"
		if (l.Body == "") == (l.SHA1 == "") {
			v.fail(field, l.Name, "needs exactly one of body and sha1")
		}
		if l.SHA1 != "" && !isSHA1(l.SHA1) {
			v.fail(field+".sha1", l.SHA1, "not 40 hex digits")
		}
		if strings.Count(l.StockKey, "{sku}") != 1 {
			v.fail(field+".stock_key", l.StockKey, "must hold {sku} once")
		}
		v.atLeast(field+".keys", l.Keys, 1)
		v.atLeast(field+".qty_arg", l.QtyArg, 1)
		v.atLeast(field+".uid_arg", l.UIDArg, 0)
		if l.QtyArg == l.UIDArg {
			v.fail(field+".qty_arg", l.QtyArg, "is uid_arg too")
		}
	}
	if c.Buy.PipelinesPerMaster < 1 || c.Buy.PipelinesPerMaster > 64 {
		v.fail("buy.pipelines_per_master", c.Buy.PipelinesPerMaster, "must be from 1 to 64")
	}
}

// checkOutbox checks the status waits and the outbox.
func (v *validator) checkOutbox(c *Config) {
	v.between("status.max_wait", c.Status.MaxWait, time.Millisecond, time.Hour)
	v.atLeast("status.max_waiters", c.Status.MaxWaiters, 0)
	v.between("status.resync", c.Status.Resync, 100*time.Millisecond, time.Minute)
	v.between("outbox.sweep_interval", c.Outbox.SweepInterval, time.Millisecond, time.Hour)
	v.between("outbox.sweep_age", c.Outbox.SweepAge, time.Millisecond, time.Hour)
	v.between("outbox.lease_ttl", c.Outbox.LeaseTTL, 100*time.Millisecond, time.Hour)
	v.atLeast("outbox.sweep_batch", c.Outbox.SweepBatch, 1)
	v.between("outbox.delete_flush", c.Outbox.DeleteFlush, time.Microsecond, 10*time.Second)
	if c.Outbox.LateAfter < time.Second || c.Outbox.LateAfter > 24*time.Hour {
		v.fail("outbox.late_after", c.Outbox.LateAfter, "must be from 1s to 24h")
	}
	if c.Outbox.LateAfter <= c.Outbox.SweepAge {
		v.fail("outbox.late_after", c.Outbox.LateAfter, "must be above outbox.sweep_age "+c.Outbox.SweepAge.String()+", or every order waiting for a sweep is late")
	}
	if c.Outbox.SweepAge <= c.Buy.CallTimeout {
		v.fail("outbox.sweep_age", c.Outbox.SweepAge, "must be above buy.call_timeout "+c.Buy.CallTimeout.String()+", or the sweeper races the tee")
	}
}

// checkSink checks the sink.
func (v *validator) checkSink(c *Config) {
	v.atLeast("sink.batch_size", c.Sink.BatchSize, 1)
	v.between("sink.batch_linger", c.Sink.BatchLinger, time.Microsecond, 10*time.Second)
	v.between("sink.retry_min", c.Sink.RetryMin, time.Microsecond, time.Minute)
	if c.Sink.RetryMax > time.Hour {
		v.fail("sink.retry_max", c.Sink.RetryMax, "must be at most 1h")
	}
	if c.Sink.Nice < 0 || c.Sink.Nice > 19 {
		v.fail("sink.nice", c.Sink.Nice, "must be 0-19 (0: as started; the sink never asks for more priority)")
	}
	if c.Sink.RetryMax < c.Sink.RetryMin {
		v.fail("sink.retry_max", c.Sink.RetryMax, "below sink.retry_min "+c.Sink.RetryMin.String())
	}
}

type validator struct{ errs []error }

func (v *validator) fail(field string, value any, reason string) {
	v.errs = append(v.errs, &FieldError{Field: field, Value: value, Reason: reason})
}

func (v *validator) nonEmpty(field, s string) {
	if s == "" {
		v.fail(field, `""`, "empty")
	}
}

func (v *validator) oneOf(field, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	v.fail(field, strconv.Quote(s), "must be one of "+joinQuoted(allowed))
}

func (v *validator) between(field string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		v.fail(field, d, "must be from "+lo.String()+" to "+hi.String())
	}
}

func (v *validator) atLeast(field string, n, lo int) {
	if n < lo {
		v.fail(field, n, "must be at least "+strconv.Itoa(lo))
	}
}

func (v *validator) hostPort(field, addr string, emptyOK bool) {
	if addr == "" {
		if !emptyOK {
			v.fail(field, `""`, "empty")
		}
		return
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.fail(field, addr, "not host:port")
		return
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		v.fail(field, addr, "port is not 0-65535")
	}
}

func (v *validator) addrs(field string, addrs []string) {
	if len(addrs) == 0 {
		v.fail(field, "[]", "empty")
		return
	}
	for _, a := range addrs {
		if a == "" {
			v.fail(field, addrs, "has an empty address")
			continue
		}
		v.hostPort(field, a, false)
	}
}

// addressMap checks "announced=dialled" entries: two host:port addresses each, and no
// announced address twice.
func (v *validator) addressMap(field string, pairs []string) {
	seen := map[string]bool{}
	for _, p := range pairs {
		from, to, ok := splitAddressPair(p)
		if !ok || from == "" || to == "" {
			v.fail(field, p, `want "announced=dialled", two host:port addresses`)
			continue
		}
		v.hostPort(field, from, false)
		v.hostPort(field, to, false)
		if seen[from] {
			v.fail(field, p, from+" is mapped twice")
		}
		seen[from] = true
	}
}

func joinQuoted(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += strconv.Quote(s)
	}
	return out
}

func isSHA1(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// MinAdminToken is the shortest admin_token accepted.
const MinAdminToken = 16

// MaxAppScriptFuel bounds redis.app_script_fuel: the scripts' cost budget
// (internal/luabound.Budget, some 0.4 s of a master's time), which no fueled script may pass.
const MaxAppScriptFuel = 1 << 24
