package conf

import (
	"flag"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/providers/structs"
	"github.com/knadh/koanf/v2"
)

// EnvPrefix starts every environment variable that conf reads.
const EnvPrefix = "SECKILL_"

// EnvConfigFile names the YAML file to load when no -config flag is given.
const EnvConfigFile = EnvPrefix + "CONFIG"

// EnvRequireServices, set to 1, makes integration tests fail rather than skip when a service
// is missing. It is not a setting, but Load accepts it in the environment.
const EnvRequireServices = EnvPrefix + "REQUIRE_SERVICES"

// EnvStackDir moves scripts/devstack.sh's directory. It is not a setting either, but a
// developer who exports it runs the binaries in the same shell.
const EnvStackDir = EnvPrefix + "STACK_DIR"

// secretKeys are settings that are never flags (a flag shows in ps) and are masked when
// printed.
var secretKeys = map[string]bool{"password": true, "users": true, "admin_token": true, "redis.password": true,
	"redis.passthrough_password": true, "mysql.dsn": true, "kafka.sasl.password": true}

// Keys lists every setting's path, sorted.
func Keys() []string {
	k := koanf.New(".")
	if err := k.Load(structs.Provider(Default(), "koanf"), nil); err != nil {
		panic(err) // Default is a static value; this cannot fail.
	}
	keys := k.Keys()
	sort.Strings(keys)
	return keys
}

// EnvName is the environment variable of a setting: redis.addrs -> SECKILL_REDIS_ADDRS.
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// BindFlags registers on fs a -config flag and one string flag per setting that is not a
// secret, named after its path (-redis.addrs). Load reads back only the flags that were set.
func BindFlags(fs *flag.FlagSet) {
	def := koanf.New(".")
	_ = def.Load(structs.Provider(Default(), "koanf"), nil)
	fs.String("config", "", "YAML configuration file (env "+EnvConfigFile+")")
	for _, key := range Keys() {
		if secretKeys[key] {
			continue
		}
		fs.String(key, "", fmt.Sprintf("default %v (env %s)", printable(def.Get(key)), EnvName(key)))
	}
}

// removedKeys are settings that are gone, with what to set instead.
var removedKeys = map[string]string{
	"redis.event_loop": "set redis.event_loops: 0 for a goroutine per client, or leave it at 1 or more for event loops",
}

// Load builds a Config from Default, then the YAML file named by fs's -config flag or by
// SECKILL_CONFIG, then the SECKILL_* variables in environ (as os.Environ gives them), then
// the flags set on fs (which must have been bound with BindFlags and parsed; nil means none).
// It does not validate: call Validate.
func Load(fs *flag.FlagSet, environ []string) (Config, error) {
	k := koanf.New(".")
	if err := k.Load(structs.Provider(Default(), "koanf"), nil); err != nil {
		return Config{}, fmt.Errorf("config: defaults: %w", err)
	}
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if name, val, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, EnvPrefix) {
			env[name] = val
		}
	}
	flags := map[string]any{}
	path := env[EnvConfigFile]
	if fs != nil {
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "config" {
				path = f.Value.String()
			} else if k.Exists(f.Name) {
				flags[f.Name] = f.Value.String()
			}
		})
	}
	if path != "" {
		if err := loadFile(k, path); err != nil {
			return Config{}, err
		}
	}
	for key, hint := range removedKeys {
		if _, ok := env[EnvName(key)]; ok {
			return Config{}, fmt.Errorf("config: %s (%s) was removed: %s", EnvName(key), key, hint)
		}
	}
	known := map[string]bool{EnvConfigFile: true, EnvRequireServices: true, EnvStackDir: true}
	envLayer := map[string]any{}
	for _, key := range Keys() {
		name := EnvName(key)
		known[name] = true
		if val, ok := env[name]; ok {
			envLayer[key] = val
		}
	}
	for name := range env {
		if !known[name] {
			return Config{}, fmt.Errorf("config: unknown environment variable %s", name)
		}
	}
	if err := k.Load(confmap.Provider(envLayer, "."), nil); err != nil {
		return Config{}, fmt.Errorf("config: environment: %w", err)
	}
	if err := k.Load(confmap.Provider(flags, "."), nil); err != nil {
		return Config{}, fmt.Errorf("config: flags: %w", err)
	}

	var c Config
	err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{
		Tag: "koanf",
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook: mapstructure.ComposeDecodeHookFunc(
				mapstructure.StringToTimeDurationHookFunc(),
				mapstructure.StringToSliceHookFunc(","),
				stringToUsers,
			),
			WeaklyTypedInput: true,
			ErrorUnused:      true,
			Result:           &c,
			TagName:          "koanf",
		},
	})
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c.Redis.Addrs = trimAll(c.Redis.Addrs)
	c.Kafka.Brokers = trimAll(c.Kafka.Brokers)
	return c, nil
}

// stringToUsers decodes SECKILL_USERS, "name:password:role,...", into []User.
func stringToUsers(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to != reflect.TypeOf([]User(nil)) {
		return data, nil
	}
	var users []User
	for _, s := range strings.Split(data.(string), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		var u User
		if err := u.UnmarshalText([]byte(s)); err != nil {
			return nil, err
		}
		users = append(users, u)
	}
	return users, nil
}

// Masked returns a copy of c with every secret replaced by "***", for printing and logging.
func (c Config) Masked() Config {
	if c.Password != "" {
		c.Password = "***"
	}
	if c.AdminToken != "" {
		c.AdminToken = "***"
	}
	if c.Redis.Password != "" {
		c.Redis.Password = "***"
	}
	if c.Redis.PassthroughPassword != "" {
		c.Redis.PassthroughPassword = "***"
	}
	if c.Kafka.SASL.Password != "" {
		c.Kafka.SASL.Password = "***"
	}
	c.MySQL.DSN = MaskDSN(c.MySQL.DSN)
	users := make([]User, len(c.Users))
	for i, u := range c.Users {
		u.Password = "***"
		users[i] = u
	}
	c.Users = users
	c.Redis.Addrs = append([]string(nil), c.Redis.Addrs...)
	c.Kafka.Brokers = append([]string(nil), c.Kafka.Brokers...)
	return c
}

// YAML renders c (mask it first) as a YAML document that Load reads back.
func (c Config) YAML() ([]byte, error) {
	k := koanf.New(".")
	if err := k.Load(structs.Provider(c, "koanf"), nil); err != nil {
		return nil, err
	}
	for key, val := range k.All() {
		if d, ok := val.(time.Duration); ok {
			if err := k.Set(key, d.String()); err != nil {
				return nil, err
			}
		}
	}
	return k.Marshal(yaml.Parser())
}

// MaskDSN hides the password in a MySQL DSN. A DSN that does not parse is hidden whole.
func MaskDSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "***"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "***"
	}
	return cfg.FormatDSN()
}

func printable(v any) any {
	if ss, ok := v.([]string); ok {
		return strings.Join(ss, ",")
	}
	return v
}

func trimAll(ss []string) []string {
	out := ss[:0:0]
	for _, s := range ss {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// loadFile merges the YAML file at path into k. A file named and empty is a mistake or a
// file caught half written (a ConfigMap being rewritten, an editor's save), never "all
// defaults": the proxy would come up logged in as no one, with none of the file's settings.
func loadFile(k *koanf.Koanf, path string) error {
	b, err := readConfigFile(path)
	if err != nil {
		return fmt.Errorf("config: file %s: %w", path, err)
	}
	fk := koanf.New(".")
	if err := fk.Load(rawbytes.Provider(b), yaml.Parser()); err != nil {
		return fmt.Errorf("config: file %s: %w", path, err)
	}
	if len(fk.Keys()) == 0 {
		return fmt.Errorf("config: file %s has no settings: it is empty (or only comments); name no file to run on the defaults", path)
	}
	for key, hint := range removedKeys {
		if fk.Exists(key) {
			return fmt.Errorf("config: file %s: %s was removed: %s", path, key, hint)
		}
	}
	if err := k.Merge(fk); err != nil {
		return fmt.Errorf("config: file %s: %w", path, err)
	}
	return nil
}
