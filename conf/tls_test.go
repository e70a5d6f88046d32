package conf

import (
	"strings"
	"testing"
)

// TestTransportSettings: every bad combination of TLS and SASL settings is refused with the
// setting named; good ones pass; the SASL password is masked and never a flag.
func TestTransportSettings(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*Config)
		want   string // "" for valid
	}{
		{"redis tls with a CA", func(c *Config) { c.Redis.TLS = TLS{Enabled: true, CAFile: "/ca.pem"} }, ""},
		{"files but TLS off", func(c *Config) { c.Redis.TLS = TLS{CAFile: "/ca.pem"} }, "redis.tls.enabled"},
		{"a certificate without its key", func(c *Config) { c.Kafka.TLS = TLS{Enabled: true, CertFile: "/c.pem"} }, "kafka.tls.cert_file"},
		{"mysql tls twice", func(c *Config) {
			c.MySQL.DSN = "root@tcp(127.0.0.1:3306)/seckill?tls=true"
			c.MySQL.TLS = TLS{Enabled: true}
		}, "mysql.tls.enabled"},
		{"tls_listen with no certificate", func(c *Config) { c.TLSListen = "127.0.0.1:6390" }, "tls_listen"},
		{"tls_listen on listen's address", func(c *Config) {
			c.TLSListen, c.TLS = c.Listen, ServerTLS{CertFile: "/s.pem", KeyFile: "/s.key"}
		}, "tls_listen"},
		{"tls_listen", func(c *Config) {
			c.TLSListen, c.TLS = "127.0.0.1:6390", ServerTLS{CertFile: "/s.pem", KeyFile: "/s.key", ClientCAFile: "/ca.pem"}
		}, ""},
		{"client CAs with no certificate", func(c *Config) { c.AdminTLS = ServerTLS{ClientCAFile: "/ca.pem"} }, "admin_tls.client_ca_file"},
		{"an unknown mechanism", func(c *Config) { c.Kafka.SASL = SASL{Mechanism: "GSSAPI", Username: "u", Password: "p"} }, "kafka.sasl.mechanism"},
		{"SCRAM without a user", func(c *Config) { c.Kafka.SASL = SASL{Mechanism: SASLSCRAM512, Password: "p"} }, "kafka.sasl.username"},
		{"two passwords", func(c *Config) {
			c.Kafka.SASL = SASL{Mechanism: SASLPlain, Username: "u", Password: "p", PasswordFile: "/pw"}
		}, "kafka.sasl.password"},
		{"no password", func(c *Config) { c.Kafka.SASL = SASL{Mechanism: SASLSCRAM256, Username: "u"} }, "kafka.sasl.password"},
		{"a user but no mechanism", func(c *Config) { c.Kafka.SASL = SASL{Username: "u"} }, "kafka.sasl.mechanism"},
		{"SCRAM from a file", func(c *Config) { c.Kafka.SASL = SASL{Mechanism: SASLSCRAM256, Username: "u", PasswordFile: "/pw"} }, ""},
	} {
		c := Default()
		tt.mutate(&c)
		err := c.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want an error naming %s", tt.name, err, tt.want)
		}
	}
	c := Default()
	c.Kafka.SASL.Password = "s3cret"
	if c.Masked().Kafka.SASL.Password != "***" {
		t.Error("kafka.sasl.password is not masked")
	}
	if !secretKeys["kafka.sasl.password"] {
		t.Error("kafka.sasl.password may be given as a flag")
	}
}
