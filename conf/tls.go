package conf

import (
	"strings"

	"github.com/go-sql-driver/mysql"
)

// TLS is a client's TLS to a service (Redis, Kafka, MySQL). The files are read at start and
// again when they change (internal/tlsfiles): a Kubernetes secret mount or cert-manager's
// rotation needs no restart.
type TLS struct {
	// Enabled turns TLS on for every connection to the service.
	Enabled bool `koanf:"enabled"`
	// CAFile is the PEM file of the CAs the server's certificate is verified against; empty:
	// the system's.
	CAFile string `koanf:"ca_file"`
	// CertFile and KeyFile are the client's own certificate and key (PEM), for a server that
	// asks for one (mutual TLS: Redis's tls-auth-clients yes, MySQL's REQUIRE X509); both or
	// neither.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// ServerName is the name the server's certificate must hold; empty: the host dialled.
	ServerName string `koanf:"server_name"`
}

// ServerTLS is a listener's TLS: the proxy's client port (tls_listen) or an admin port.
type ServerTLS struct {
	// CertFile and KeyFile are the server's certificate (with its chain) and key, PEM.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// ClientCAFile, when set, asks every client for a certificate and verifies it against
	// these CAs (mutual TLS); a client without one is refused at the handshake.
	ClientCAFile string `koanf:"client_ca_file"`
}

// On says whether the listener serves TLS.
func (s ServerTLS) On() bool { return s.CertFile != "" }

// SASL is Kafka's SASL login.
type SASL struct {
	// Mechanism is "" (no SASL), "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512". PLAIN sends the
	// password itself: use it with kafka.tls only.
	Mechanism string `koanf:"mechanism"`
	Username  string `koanf:"username"`
	// Password, or PasswordFile: a file that holds it (a secret mount), read again when it
	// changes, for the next connection.
	Password     string `koanf:"password"`
	PasswordFile string `koanf:"password_file"`
}

// SASL mechanisms.
const (
	SASLPlain      = "PLAIN"
	SASLSCRAM256   = "SCRAM-SHA-256"
	SASLSCRAM512   = "SCRAM-SHA-512"
	saslMechanisms = "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
)

// checkTLS checks a client's TLS settings under field.
func (v *validator) checkTLS(field string, t TLS) {
	if !t.Enabled {
		if t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" {
			v.fail(field+".enabled", false, "files or a server name are set but TLS is off: set "+field+".enabled: true, or remove them")
		}
		return
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.fail(field+".cert_file", t.CertFile, "cert_file and key_file go together")
	}
}

// checkServerTLS checks a listener's TLS settings under field.
func (v *validator) checkServerTLS(field string, t ServerTLS) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.fail(field+".cert_file", t.CertFile, "cert_file and key_file go together")
	}
	if t.ClientCAFile != "" && t.CertFile == "" {
		v.fail(field+".client_ca_file", t.ClientCAFile, "needs cert_file and key_file: client certificates are asked for over TLS only")
	}
}

// checkTransport checks every hop's TLS and Kafka's SASL.
func (v *validator) checkTransport(c *Config) {
	v.checkTLS("redis.tls", c.Redis.TLS)
	v.checkTLS("kafka.tls", c.Kafka.TLS)
	v.checkTLS("mysql.tls", c.MySQL.TLS)
	v.checkServerTLS("tls", c.TLS)
	v.checkServerTLS("admin_tls", c.AdminTLS)
	v.hostPort("tls_listen", c.TLSListen, true)
	switch {
	case c.TLSListen != "" && !c.TLS.On():
		v.fail("tls_listen", c.TLSListen, "needs tls.cert_file and tls.key_file")
	case c.TLSListen != "" && c.TLSListen == c.Listen:
		v.fail("tls_listen", c.TLSListen, "is listen's address too")
	}
	if c.MySQL.TLS.Enabled {
		if cfg, err := mysql.ParseDSN(c.MySQL.DSN); err == nil && cfg.TLSConfig != "" {
			v.fail("mysql.tls.enabled", true, "the DSN sets tls="+cfg.TLSConfig+" too; use one of them")
		}
	}
	s := c.Kafka.SASL
	switch strings.ToUpper(s.Mechanism) {
	case "":
		if s.Username != "" || s.Password != "" || s.PasswordFile != "" {
			v.fail("kafka.sasl.mechanism", `""`, "a username or password is set but no mechanism: set "+saslMechanisms)
		}
		return
	case SASLPlain, SASLSCRAM256, SASLSCRAM512:
	default:
		v.fail("kafka.sasl.mechanism", s.Mechanism, "must be "+saslMechanisms)
	}
	v.nonEmpty("kafka.sasl.username", s.Username)
	if (s.Password == "") == (s.PasswordFile == "") {
		v.fail("kafka.sasl.password", "(masked)", "set exactly one of kafka.sasl.password and kafka.sasl.password_file")
	}
}
