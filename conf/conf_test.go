package conf

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	if c.Listen != "127.0.0.1:6380" || c.Buy.ReplyAfter != ReplyAfterLua || c.Redis.StateReloadInterval != time.Second {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

func TestEveryKeyHasAnEnvName(t *testing.T) {
	want := map[string]string{
		"listen":          "SECKILL_LISTEN",
		"redis.addrs":     "SECKILL_REDIS_ADDRS",
		"kafka.brokers":   "SECKILL_KAFKA_BROKERS",
		"mysql.dsn":       "SECKILL_MYSQL_DSN",
		"buy.reply_after": "SECKILL_BUY_REPLY_AFTER",
	}
	keys := map[string]bool{}
	for _, k := range Keys() {
		keys[k] = true
	}
	for key, env := range want {
		if !keys[key] {
			t.Errorf("key %q missing from Keys()", key)
		}
		if got := EnvName(key); got != env {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, env)
		}
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "seckill.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLayers(t *testing.T) {
	file := writeFile(t, "listen: 127.0.0.1:1111\nredis:\n  addrs: [10.0.0.1:7000]\n  pool_size: 7\nbuy:\n  call_timeout: 3s\n")
	tests := []struct {
		name  string
		env   []string
		flags []string
		check func(t *testing.T, c Config)
	}{
		{"defaults only", nil, nil, func(t *testing.T, c Config) {
			if !reflect.DeepEqual(c, Default()) {
				t.Errorf("got %+v, want Default()", c)
			}
		}},
		{"file", []string{"SECKILL_CONFIG=" + file}, nil, func(t *testing.T, c Config) {
			if c.Listen != "127.0.0.1:1111" || c.Redis.PoolSize != 7 || c.Buy.CallTimeout != 3*time.Second {
				t.Errorf("file not applied: %+v", c)
			}
			if !reflect.DeepEqual(c.Redis.Addrs, []string{"10.0.0.1:7000"}) {
				t.Errorf("addrs = %v", c.Redis.Addrs)
			}
			if c.Kafka.Topic != Default().Kafka.Topic {
				t.Errorf("a key the file lacks lost its default: %q", c.Kafka.Topic)
			}
		}},
		{"env over file", []string{"SECKILL_CONFIG=" + file, "SECKILL_LISTEN=127.0.0.1:2222",
			"SECKILL_REDIS_ADDRS=127.0.0.1:7000, 127.0.0.1:7001", "SECKILL_BUY_CALL_TIMEOUT=250ms",
			"SECKILL_MYSQL_DSN=u:p@tcp(db:3306)/x", "SECKILL_BUY_COMPAT_REPLIES=true"}, nil,
			func(t *testing.T, c Config) {
				if c.Listen != "127.0.0.1:2222" || c.Buy.CallTimeout != 250*time.Millisecond || !c.Buy.CompatReplies {
					t.Errorf("env not applied: %+v", c)
				}
				if !reflect.DeepEqual(c.Redis.Addrs, []string{"127.0.0.1:7000", "127.0.0.1:7001"}) {
					t.Errorf("addrs = %q", c.Redis.Addrs)
				}
				if c.Redis.PoolSize != 7 {
					t.Errorf("file value lost under env: pool_size=%d", c.Redis.PoolSize)
				}
				if c.MySQL.DSN != "u:p@tcp(db:3306)/x" {
					t.Errorf("dsn = %q", c.MySQL.DSN)
				}
			}},
		{"flags over env", []string{"SECKILL_CONFIG=" + file, "SECKILL_LISTEN=127.0.0.1:2222", "SECKILL_REQUIRE_SERVICES=1", "SECKILL_STACK_DIR=/tmp/stack"},
			[]string{"-listen=127.0.0.1:3333", "-redis.pool_size=9", "-kafka.brokers=a:1,b:2"},
			func(t *testing.T, c Config) {
				if c.Listen != "127.0.0.1:3333" || c.Redis.PoolSize != 9 {
					t.Errorf("flags not applied: %+v", c)
				}
				if !reflect.DeepEqual(c.Kafka.Brokers, []string{"a:1", "b:2"}) {
					t.Errorf("brokers = %q", c.Kafka.Brokers)
				}
			}},
		{"-config flag names the file", nil, []string{"-config=" + file}, func(t *testing.T, c Config) {
			if c.Listen != "127.0.0.1:1111" {
				t.Errorf("file from -config not applied: %q", c.Listen)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			BindFlags(fs)
			if err := fs.Parse(tt.flags); err != nil {
				t.Fatal(err)
			}
			c, err := Load(fs, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"unknown env", []string{"SECKILL_LISTN=x"}, "unknown environment variable SECKILL_LISTN"},
		{"bad duration", []string{"SECKILL_BUY_CALL_TIMEOUT=soon"}, "call_timeout"},
		{"bad int", []string{"SECKILL_REDIS_POOL_SIZE=many"}, "pool_size"},
		{"missing file", []string{"SECKILL_CONFIG=/nonexistent/seckill.yaml"}, "/nonexistent/seckill.yaml"},
		{"unknown file key", []string{"SECKILL_CONFIG=" + writeFile(t, "redis:\n  adrs: [x:1]\n")}, "adrs"},
		{"bad yaml", []string{"SECKILL_CONFIG=" + writeFile(t, "listen: [\n")}, "seckill.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(nil, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load() error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestUsersFromEnvAndFile(t *testing.T) {
	c, err := Load(nil, []string{"SECKILL_USERS=shop:s3cret:app,ops:0ps:admin"})
	if err != nil {
		t.Fatal(err)
	}
	want := []User{{"shop", "s3cret", RoleApp}, {"ops", "0ps", RoleAdmin}}
	if !reflect.DeepEqual(c.Users, want) {
		t.Fatalf("users from env = %+v", c.Users)
	}
	c, err = Load(nil, []string{"SECKILL_CONFIG=" + writeFile(t, "users:\n  - {name: shop, password: s3cret, role: app}\n")})
	if err != nil || !reflect.DeepEqual(c.Users, want[:1]) {
		t.Fatalf("users from file = %+v, %v", c.Users, err)
	}
	if _, err := Load(nil, []string{"SECKILL_USERS=shop-no-role"}); err == nil {
		t.Fatal("a malformed SECKILL_USERS was accepted")
	}
	var out bytes.Buffer
	c.Users = want
	if err := writeYAML(&out, c.Masked()); err != nil || strings.Contains(out.String(), "s3cret") {
		t.Fatalf("printed users show a password or fail: %v\n%s", err, out.String())
	}
}

func TestSecretsAreNotFlags(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	BindFlags(fs)
	for key := range secretKeys {
		if fs.Lookup(key) != nil {
			t.Errorf("secret %q is a flag", key)
		}
	}
	if fs.Lookup("redis.addrs") == nil {
		t.Error("redis.addrs has no flag")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		field  string
		mutate func(c *Config)
	}{
		{"listen", func(c *Config) { c.Listen = "" }},
		{"listen", func(c *Config) { c.Listen = "localhost" }},
		{"listen", func(c *Config) { c.Listen = "127.0.0.1:99999" }},
		{"admin_listen", func(c *Config) { c.AdminListen = "nope" }},
		{"log.format", func(c *Config) { c.Log.Format = "xml" }},
		{"log.level", func(c *Config) { c.Log.Level = "loud" }},
		{"redis.addrs", func(c *Config) { c.Redis.Addrs = nil }},
		{"redis.mode", func(c *Config) { c.Redis.Mode = "sentinel" }},
		{"redis.addrs", func(c *Config) { c.Redis.Mode = ModeStandalone }},
		{"redis.addrs", func(c *Config) { c.Redis.Addrs = []string{"127.0.0.1:7000", ""} }},
		{"redis.dial_timeout", func(c *Config) { c.Redis.DialTimeout = 0 }},
		{"redis.read_timeout", func(c *Config) { c.Redis.ReadTimeout = -time.Second }},
		{"redis.write_timeout", func(c *Config) { c.Redis.WriteTimeout = 0 }},
		{"redis.pool_timeout", func(c *Config) { c.Redis.PoolTimeout = 0 }},
		{"redis.pool_size", func(c *Config) { c.Redis.PoolSize = 0 }},
		{"redis.min_idle_conns", func(c *Config) { c.Redis.MinIdleConns = -1 }},
		{"redis.min_idle_conns", func(c *Config) { c.Redis.MinIdleConns = c.Redis.PoolSize + 1 }},
		{"redis.state_reload_interval", func(c *Config) { c.Redis.StateReloadInterval = time.Millisecond }},
		{"redis.state_reload_interval", func(c *Config) { c.Redis.StateReloadInterval = time.Hour }},
		{"redis.max_redirects", func(c *Config) { c.Redis.MaxRedirects = 0 }},
		{"redis.passthrough_conns", func(c *Config) { c.Redis.PassthroughConns = 0 }},
		{"redis.spare_conns", func(c *Config) { c.Redis.SpareConns = -1 }},
		{"status.max_wait", func(c *Config) { c.Status.MaxWait = 0 }},
		{"status.max_wait", func(c *Config) { c.Status.MaxWait = 2 * time.Hour }},
		{"status.max_waiters", func(c *Config) { c.Status.MaxWaiters = -1 }},
		{"status.resync", func(c *Config) { c.Status.Resync = time.Millisecond }},
		{"redis.spare_conns", func(c *Config) { c.Redis.SpareConns = 65 }},
		{"redis.max_own_conns", func(c *Config) { c.Redis.MaxOwnConns = -1 }},
		{"redis.own_conns_share", func(c *Config) { c.Redis.OwnConnsShare = 1.5 }},
		{"redis.own_conns_share", func(c *Config) { c.Redis.OwnConnsShare = -0.1 }},
		{"redis.keys_max", func(c *Config) { c.Redis.KeysMax = -1 }},
		{"redis.own_conns_share", func(c *Config) { c.Redis.OwnConnsShare = math.NaN() }},
		{"limits.client_share", func(c *Config) { c.Limits.ClientShare = math.NaN() }},
		{"limits.client_share", func(c *Config) { c.Limits.ClientShare = 0 }},
		{"limits.client_share", func(c *Config) { c.Limits.ClientShare = 1.01 }},
		{"admission.lease_share", func(c *Config) { c.Admission.LeaseShare = math.NaN() }},
		{"redis.command_timeout", func(c *Config) { c.Redis.CommandTimeout = 2 * time.Hour }},
		{"redis.dial_timeout", func(c *Config) { c.Redis.DialTimeout = time.Hour }},
		{"buy.call_timeout", func(c *Config) { c.Buy.CallTimeout = time.Hour }},
		{"buy.wait_timeout", func(c *Config) { c.Buy.WaitReplicas, c.Buy.WaitTimeout = 1, 500*time.Microsecond }},
		{"buy.sold_out_reprobe", func(c *Config) { c.Buy.SoldOutReprobe = 48 * time.Hour }},
		{"outbox.lease_ttl", func(c *Config) { c.Outbox.LeaseTTL = time.Millisecond }},
		{"outbox.lease_ttl", func(c *Config) { c.Outbox.LeaseTTL = 2 * time.Hour }},
		{"outbox.sweep_interval", func(c *Config) { c.Outbox.SweepInterval = 2 * time.Hour }},
		{"sink.retry_max", func(c *Config) { c.Sink.RetryMax = 2 * time.Hour }},
		{"mysql.conn_max_lifetime", func(c *Config) { c.MySQL.ConnMaxLifetime = 48 * time.Hour }},
		{"redis.app_scripts[0]", func(c *Config) { c.Redis.AppScripts = []string{"*"} }},
		{"limits.outcome_channels_per_conn", func(c *Config) { c.Limits.OutcomeChannelsPerConn = 0 }},
		{"limits.outcome_channels", func(c *Config) { c.Limits.OutcomeChannels = 0 }},
		{"redis.address_map", func(c *Config) { c.Redis.AddressMap = []string{"127.0.0.1:7000"} }},
		{"redis.address_map", func(c *Config) { c.Redis.AddressMap = []string{"127.0.0.1:7000=toxiproxy"} }},
		{"redis.address_map", func(c *Config) {
			c.Redis.AddressMap = []string{"127.0.0.1:7000=127.0.0.1:27000", "127.0.0.1:7000=127.0.0.1:27001"}
		}},
		{"kafka.address_map", func(c *Config) { c.Kafka.AddressMap = []string{"=127.0.0.1:29092"} }},
		{"kafka.brokers", func(c *Config) { c.Kafka.Brokers = []string{"kafka"} }},
		{"kafka.topic", func(c *Config) { c.Kafka.Topic = "" }},
		{"kafka.dead_letter_topic", func(c *Config) { c.Kafka.DeadLetterTopic = "" }},
		{"kafka.dead_letter_topic", func(c *Config) { c.Kafka.DeadLetterTopic = c.Kafka.Topic }},
		{"kafka.client_id", func(c *Config) { c.Kafka.ClientID = "" }},
		{"kafka.group", func(c *Config) { c.Kafka.Group = "" }},
		{"kafka.version", func(c *Config) { c.Kafka.Version = "three" }},
		{"kafka.version", func(c *Config) { c.Kafka.Version = "0.11.0" }},
		{"kafka.dial_timeout", func(c *Config) { c.Kafka.DialTimeout = 0 }},
		{"kafka.linger", func(c *Config) { c.Kafka.Linger = -time.Millisecond }},
		{"kafka.linger", func(c *Config) { c.Kafka.Linger = 2 * time.Second }},
		{"kafka.session_timeout", func(c *Config) { c.Kafka.SessionTimeout = 5 * time.Second }},
		{"kafka.session_timeout", func(c *Config) { c.Kafka.SessionTimeout = time.Hour }},
		{"kafka.partitions", func(c *Config) { c.Kafka.Partitions = 0 }},
		{"kafka.replication_factor", func(c *Config) { c.Kafka.ReplicationFactor = 0 }},
		{"mysql.dsn", func(c *Config) { c.MySQL.DSN = "" }},
		{"mysql.dsn", func(c *Config) { c.MySQL.DSN = "root:secret@tcp(db:3306" }},
		{"mysql.max_open_conns", func(c *Config) { c.MySQL.MaxOpenConns = 0 }},
		{"mysql.max_idle_conns", func(c *Config) { c.MySQL.MaxIdleConns = -1 }},
		{"mysql.conn_max_lifetime", func(c *Config) { c.MySQL.ConnMaxLifetime = 0 }},
		{"limits.max_clients", func(c *Config) { c.Limits.MaxClients = 0 }},
		{"limits.max_pipeline", func(c *Config) { c.Limits.MaxPipeline = 0 }},
		{"limits.max_arg_bytes", func(c *Config) { c.Limits.MaxArgBytes = 10 }},
		{"limits.max_inflight", func(c *Config) { c.Limits.MaxInflight = 0 }},
		{"limits.max_inflight", func(c *Config) { c.Limits.MaxInflight = 1 << 30 }},
		{"buy.reply_after", func(c *Config) { c.Buy.ReplyAfter = "never" }},
		{"buy.call_timeout", func(c *Config) { c.Buy.CallTimeout = 0 }},
		{"buy.wait_replicas", func(c *Config) { c.Buy.WaitReplicas = -1 }},
		{"buy.wait_timeout", func(c *Config) { c.Buy.WaitReplicas, c.Buy.WaitTimeout = 1, -time.Millisecond }},
		{"buy.wait_timeout", func(c *Config) { c.Buy.WaitReplicas, c.Buy.WaitTimeout = 1, 2*c.Buy.CallTimeout }},
		{"buy.sold_out_reprobe", func(c *Config) { c.Buy.SoldOutReprobe = 0 }},
		{"users[0].name", func(c *Config) { c.Users = []User{{Name: "", Password: "p", Role: RoleApp}} }},
		{"users[0].name", func(c *Config) { c.Users = []User{{Name: "default", Password: "p", Role: RoleApp}} }},
		{"users[1].name", func(c *Config) { c.Users = []User{{"a", "p", RoleApp}, {"a", "q", RoleAdmin}} }},
		{"users[0].password", func(c *Config) { c.Users = []User{{Name: "a", Role: RoleApp}} }},
		{"users[0].role", func(c *Config) { c.Users = []User{{Name: "a", Password: "p", Role: "root"}} }},
		{"buy.pipelines_per_master", func(c *Config) { c.Buy.PipelinesPerMaster = 0 }},
		{"buy.pipelines_per_master", func(c *Config) { c.Buy.PipelinesPerMaster = 65 }},
		{"buy.legacy[0]", func(c *Config) {
			c.Buy.Legacy = []LegacyScript{{StockKey: "s:{sku}", Keys: 1, QtyArg: 1}}
		}},
		{"buy.legacy[0].sha1", func(c *Config) {
			c.Buy.Legacy = []LegacyScript{{SHA1: "xyz", StockKey: "s:{sku}", Keys: 1, QtyArg: 1}}
		}},
		{"buy.legacy[0].stock_key", func(c *Config) {
			c.Buy.Legacy = []LegacyScript{{Body: "return 1", StockKey: "s:stock", Keys: 1, QtyArg: 1}}
		}},
		{"buy.legacy[0].qty_arg", func(c *Config) {
			c.Buy.Legacy = []LegacyScript{{Body: "return 1", StockKey: "s:{sku}", Keys: 1, QtyArg: 0}}
		}},
		{"outbox.sweep_interval", func(c *Config) { c.Outbox.SweepInterval = 0 }},
		{"outbox.sweep_age", func(c *Config) { c.Outbox.SweepAge = c.Buy.CallTimeout }},
		{"outbox.lease_ttl", func(c *Config) { c.Outbox.LeaseTTL = 0 }},
		{"outbox.sweep_batch", func(c *Config) { c.Outbox.SweepBatch = 0 }},
		{"outbox.delete_flush", func(c *Config) { c.Outbox.DeleteFlush = 0 }},
		{"sink.batch_size", func(c *Config) { c.Sink.BatchSize = 0 }},
		{"sink.batch_linger", func(c *Config) { c.Sink.BatchLinger = 0 }},
		{"sink.retry_min", func(c *Config) { c.Sink.RetryMin = 0 }},
		{"sink.retry_max", func(c *Config) { c.Sink.RetryMax = time.Millisecond }},
		{"sink.nice", func(c *Config) { c.Sink.Nice = -1 }},
		{"sink.nice", func(c *Config) { c.Sink.Nice = 20 }},
	}
	for _, tt := range tests {
		c := Default()
		tt.mutate(&c)
		err := c.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: Validate() = %v, want a *FieldError", tt.field, err)
			continue
		}
		if fe.Field != tt.field {
			t.Errorf("Validate() names %q, want %q (%v)", fe.Field, tt.field, err)
		}
		if !strings.Contains(err.Error(), tt.field+"=") {
			t.Errorf("error %q does not show field and value", err)
		}
	}
}

func TestValidateReportsEveryError(t *testing.T) {
	c := Default()
	c.Listen, c.Kafka.Topic = "", ""
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "listen=") || !strings.Contains(err.Error(), "kafka.topic=") {
		t.Fatalf("Validate() = %v, want both listen and kafka.topic", err)
	}
}

func TestMaskedHidesSecrets(t *testing.T) {
	c := Default()
	c.Password, c.Redis.Password, c.AdminToken = "app-secret", "redis-secret", "admin-token-secret"
	c.MySQL.DSN = "seckill:db-secret@tcp(127.0.0.1:3306)/seckill"
	var out bytes.Buffer
	if err := writeYAML(&out, c.Masked()); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"app-secret", "redis-secret", "db-secret", "admin-token-secret"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("printed config shows %q:\n%s", secret, out.String())
		}
	}
	if !strings.Contains(out.String(), "seckill:***@tcp(127.0.0.1:3306)/seckill") {
		t.Errorf("masked DSN missing:\n%s", out.String())
	}
	if c.Password != "app-secret" {
		t.Error("Masked changed its receiver")
	}
}

func TestPrintedConfigLoadsBack(t *testing.T) {
	c := Default()
	c.Listen = "127.0.0.1:4444"
	c.Buy.WaitTimeout = 25 * time.Millisecond
	b, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load(nil, []string{"SECKILL_CONFIG=" + writeFile(t, string(b))})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip changed the config:\n got %+v\nwant %+v", got, c)
	}
}

func TestParseCommandLine(t *testing.T) {
	var out bytes.Buffer
	cl, err := ParseCommandLine("x", []string{"-check-config"}, nil, &out)
	if err != nil || !cl.Done || !strings.Contains(out.String(), "config OK") {
		t.Fatalf("-check-config: %v %+v %q", err, cl, out.String())
	}
	out.Reset()
	_, err = ParseCommandLine("x", []string{"-check-config", "-buy.reply_after=later"}, nil, &out)
	if err == nil || !strings.Contains(err.Error(), `buy.reply_after="later"`) {
		t.Fatalf("-check-config with a bad value: %v", err)
	}
	out.Reset()
	cl, err = ParseCommandLine("x", []string{"-print-config"}, []string{"SECKILL_PASSWORD=hunter2"}, &out)
	if err != nil || !cl.Done || strings.Contains(out.String(), "hunter2") || !strings.Contains(out.String(), "password: '***'") {
		t.Fatalf("-print-config: %v\n%s", err, out.String())
	}
	if _, err := ParseCommandLine("x", []string{"-password=x"}, nil, &out); err == nil {
		t.Fatal("a password flag was accepted")
	}
	if _, err := ParseCommandLine("x", []string{"stray"}, nil, &out); err == nil {
		t.Fatal("a stray argument was accepted")
	}
}

// TestAddressMap: redis.address_map from the environment, comma-separated with spaces, maps
// each announced address to the one to dial.
func TestAddressMap(t *testing.T) {
	c, err := Load(nil, []string{"SECKILL_REDIS_ADDRESS_MAP=127.0.0.1:7000=127.0.0.1:27000, 127.0.0.1:7001 = 127.0.0.1:27001"})
	if err != nil {
		t.Fatal(err)
	}
	got := AddressMap(c.Redis.AddressMap)
	want := map[string]string{"127.0.0.1:7000": "127.0.0.1:27000", "127.0.0.1:7001": "127.0.0.1:27001"}
	if !maps.Equal(got, want) {
		t.Errorf("AddressMap = %v, want %v", got, want)
	}
	if m := AddressMap(c.Kafka.AddressMap); m != nil {
		t.Errorf("kafka.address_map unset: %v, want nil", m)
	}
}

// TestUnsafe: a proxy open to its network with protected mode off, or a secret left at a
// placeholder, is refused by -check-config (exit status 2, with every finding), at start and
// at a reload; loopback-only or authenticated proxies pass.
func TestUnsafe(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		environ []string
		want    []string
	}{
		{"the defaults", nil, nil, nil},
		{"open, protected mode off", []string{"-listen=:6380", "-protected_mode=false"}, nil, []string{"every client that reaches it would be an admin"}},
		{"open on loopback, protected mode off", []string{"-listen=127.0.0.1:6380", "-protected_mode=false"}, nil, nil},
		{"users, protected mode off", []string{"-listen=:6380", "-protected_mode=false"}, []string{"SECKILL_USERS=a:pw1:app"}, nil},
		{"the manifests' placeholders", nil, []string{"SECKILL_USERS=shop:CHANGE-ME:app,ops:s3cr3t-ops:admin",
			"SECKILL_ADMIN_TOKEN=change_me_admin", "SECKILL_REDIS_PASSWORD=ChangeMe",
			"SECKILL_MYSQL_DSN=seckill:CHANGE-ME@tcp(mysql:3306)/seckill"},
			[]string{"admin_token", "redis.password", "mysql.dsn", "users shop"}},
		{"a short admin token", nil, []string{"SECKILL_ADMIN_TOKEN=9f1c0e77d2"}, []string{"admin_token: 10 bytes"}},
		{"real secrets", nil, []string{"SECKILL_USERS=shop:Zq8-x1:app", "SECKILL_ADMIN_TOKEN=9f1c0e77d2a4b6c8", "SECKILL_MYSQL_DSN=seckill:Zq8@tcp(mysql:3306)/seckill"}, nil},
	} {
		var out strings.Builder
		_, err := ParseCommandLine("x", append([]string{"-check-config"}, tt.args...), tt.environ, &out)
		if len(tt.want) == 0 {
			if err != nil || !strings.Contains(out.String(), "config OK") {
				t.Errorf("%s: %v %q, want config OK", tt.name, err, out.String())
			}
			continue
		}
		if !errors.Is(err, ErrUnsafe) {
			t.Errorf("%s: %v, want ErrUnsafe", tt.name, err)
			continue
		}
		if strings.Contains(out.String(), "config OK") {
			t.Errorf("%s: says config OK: %q", tt.name, out.String())
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", tt.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "s3cr3t-ops") {
			t.Errorf("%s: the refusal prints a real secret: %q", tt.name, err)
		}
	}
}

// TestWarnings: -check-config warns about a proxy open to its network, about admin ports
// reachable without a token, about buys answered before a replica holds them, and about every
// bound turned off or set past meaning (which -strict then refuses), and says nothing of the
// defaults.
func TestWarnings(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"the defaults", func(*Config) {}, nil},
		{"open on every interface", func(c *Config) { c.Listen = "0.0.0.0:6380" }, []string{"protected_mode"}},
		{"users on every interface", func(c *Config) { c.Listen, c.Users = "0.0.0.0:6380", []User{{Name: "a", Password: "p", Role: RoleApp}} }, nil},
		{"admin ports on the network", func(c *Config) { c.AdminListen, c.Sink.AdminListen = "0.0.0.0:6381", "0.0.0.0:6382" },
			[]string{"admin_listen 0.0.0.0:6381", "sink.admin_listen 0.0.0.0:6382"}},
		{"admin ports with a token", func(c *Config) { c.AdminListen, c.AdminToken = "0.0.0.0:6381", "t" }, nil},
		{"no replica waited for", func(c *Config) { c.Buy.WaitReplicas = 0 }, []string{"buy.wait_replicas 0"}},
		{"bounds turned off", func(c *Config) {
			c.Redis.KeysMax, c.Redis.MaxOwnConns, c.Admission.UnknownSKURate, c.Limits.ReplyBuffers = 0, 0, 0, 0
		}, []string{"redis.keys_max 0", "redis.max_own_conns 0", "admission.unknown_sku_rate 0", "limits.reply_buffers 0"}},
		{"bounds that mean nothing", func(c *Config) { c.Buy.WaitReplicas, c.Limits.MaxClients = 9223372036854775807, 100000000 },
			[]string{"buy.wait_replicas 9223372036854775807", "limits.max_clients 100000000"}},
	} {
		c := Default()
		tt.mutate(&c)
		got := c.Warnings()
		if len(got) != len(tt.want) {
			t.Errorf("%s: %q, want %d warnings", tt.name, got, len(tt.want))
			continue
		}
		for i, w := range tt.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: warning %q does not say %q", tt.name, got[i], w)
			}
		}
	}
}

// TestRemovedKeys: redis.event_loop, from a file or the environment, is refused with what to
// set instead; redis.event_loops 0 is a goroutine per client, and a negative count is refused.
func TestRemovedKeys(t *testing.T) {
	file := t.TempDir() + "/c.yaml"
	if err := os.WriteFile(file, []byte("redis:\n  event_loop: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, environ := range [][]string{{EnvConfigFile + "=" + file}, {"SECKILL_REDIS_EVENT_LOOP=false"}} {
		if _, err := Load(nil, environ); err == nil || !strings.Contains(err.Error(), "redis.event_loops: 0") {
			t.Errorf("%v: %v, want a refusal that names redis.event_loops: 0", environ, err)
		}
	}
	c, err := Load(nil, []string{"SECKILL_REDIS_EVENT_LOOPS=0"})
	if err != nil || c.Validate() != nil || c.Redis.EventLoops != 0 {
		t.Errorf("event_loops 0: %v, %v", err, c.Validate())
	}
	c.Redis.EventLoops = -1
	if err := c.Validate(); err == nil {
		t.Error("event_loops -1 validates")
	}
}

// TestWaitFor: WAIT's timeout is buy.wait_timeout, or half of buy.call_timeout when it is 0,
// so that a shorter call timeout needs no wait timeout of its own.
func TestWaitFor(t *testing.T) {
	d := Default()
	if d.Buy.WaitReplicas != 1 || d.Buy.WaitFor() != d.Buy.CallTimeout/2 {
		t.Fatalf("defaults: wait_replicas %d, WAIT timeout %v; want 1 and half of %v", d.Buy.WaitReplicas, d.Buy.WaitFor(), d.Buy.CallTimeout)
	}
	d.Buy.CallTimeout = 300 * time.Millisecond
	if err := d.Validate(); err != nil || d.Buy.WaitFor() != 150*time.Millisecond {
		t.Fatalf("call_timeout 300ms: %v, WAIT timeout %v", err, d.Buy.WaitFor())
	}
	d.Buy.WaitTimeout = 20 * time.Millisecond
	if d.Buy.WaitFor() != 20*time.Millisecond {
		t.Fatalf("wait_timeout set: WAIT timeout %v", d.Buy.WaitFor())
	}
}

// TestEmptyFile: a config file that is named but holds no settings (empty, blank, only
// comments: a file caught half written) is refused, never read as the defaults; a file with
// one setting loads.
func TestEmptyFile(t *testing.T) {
	for _, body := range []string{"", "\n  \n", "# listen: 127.0.0.1:1\n", "---\n"} {
		_, err := Load(nil, []string{EnvConfigFile + "=" + writeFile(t, body)})
		if err == nil || !strings.Contains(err.Error(), "has no settings") {
			t.Errorf("file %q: %v, want a refusal that says it has no settings", body, err)
		}
	}
	c, err := Load(nil, []string{EnvConfigFile + "=" + writeFile(t, "redis:\n  username: seckill\n")})
	if err != nil || c.Redis.Username != "seckill" {
		t.Errorf("a file with one setting: %v, username %q", err, c.Redis.Username)
	}
}

// TestCheckConfigStrict: -check-config prints warnings and passes; with -strict a warning
// refuses the configuration (ErrWarned, after the warnings are printed) and a configuration
// without one passes; -strict without -check-config is refused.
func TestCheckConfigStrict(t *testing.T) {
	open := []string{"SECKILL_LISTEN=0.0.0.0:6380"}
	var out strings.Builder
	if _, err := ParseCommandLine("x", []string{"-check-config"}, open, &out); err != nil || !strings.Contains(out.String(), "warning: ") {
		t.Errorf("-check-config with a warning: %v %q, want it printed and passed", err, out.String())
	}
	out.Reset()
	_, err := ParseCommandLine("x", []string{"-check-config", "-strict"}, open, &out)
	if !errors.Is(err, ErrWarned) || !strings.Contains(out.String(), "protected_mode") || strings.Contains(out.String(), "config OK") {
		t.Errorf("-check-config -strict with a warning: %v %q, want ErrWarned after the warning", err, out.String())
	}
	out.Reset()
	if cl, err := ParseCommandLine("x", []string{"-check-config", "-strict"}, nil, &out); err != nil || !cl.Done || out.String() != "config OK\n" {
		t.Errorf("-check-config -strict with no warning: %v %q", err, out.String())
	}
	if _, err := ParseCommandLine("x", []string{"-strict"}, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "-strict goes with -check-config") {
		t.Errorf("-strict alone: %v, want a refusal", err)
	}
}

// TestAnyAppScriptNeedsItsFlag: redis.app_scripts ["*"] is refused alone and accepted with
// redis.app_scripts_any_unsafe, which says what it risks.
func TestAnyAppScriptNeedsItsFlag(t *testing.T) {
	c := Default()
	c.Redis.AppScripts = []string{"*"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "app_scripts_any_unsafe") {
		t.Fatalf("[\"*\"] alone: %v", err)
	}
	c.Redis.AppScriptsAnyUnsafe = true
	if err := c.Validate(); err != nil {
		t.Fatalf("[\"*\"] with its flag: %v", err)
	}
}

// TestWaitForWholeMilliseconds: the WAIT timeout in force is whole milliseconds and never 0,
// which Redis's WAIT reads as for ever (a buy.call_timeout under 2 ms made half of it 0).
func TestWaitForWholeMilliseconds(t *testing.T) {
	for _, tt := range []struct{ call, wait, want time.Duration }{
		{time.Second, 0, 500 * time.Millisecond},
		{time.Millisecond, 0, time.Millisecond},
		{1500 * time.Microsecond, 0, time.Millisecond},
		{time.Second, 2500 * time.Microsecond, 2 * time.Millisecond},
	} {
		if got := (Buy{CallTimeout: tt.call, WaitTimeout: tt.wait}).WaitFor(); got != tt.want {
			t.Errorf("call %v, wait %v: %v, want %v", tt.call, tt.wait, got, tt.want)
		}
	}
}
