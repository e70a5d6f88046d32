package schema_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"seckill-proxy/conf"
	"seckill-proxy/internal/schema"
	"seckill-proxy/internal/testenv"
)

// TestMySQLTLS: with mysql.tls the pool talks TLS, the server's certificate verified against
// the CA file for the host dialled, to a user that may log in over TLS only (RDS's
// require_secure_transport); without it that user is refused, and so is a server whose
// certificate the CA did not sign.
func TestMySQLTLS(t *testing.T) {
	dir := testenv.TLS(t)
	base := testenv.Config(t).MySQL
	testenv.MySQL(t)
	cfg, err := mysql.ParseDSN(base.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd = testenv.MySQLTLSUser, testenv.MySQLTLSPassword
	c := base
	c.DSN = cfg.FormatDSN()
	ping := func(c conf.MySQL) (string, error) {
		db, err := schema.Open(c)
		if err != nil {
			return "", err
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var name, cipher string
		err = db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher)
		return cipher, err
	}
	if _, err := ping(c); err == nil {
		t.Fatal("a user that must use TLS logged in without it")
	}
	c.TLS = conf.TLS{Enabled: true, CAFile: filepath.Join(dir, "ca.pem")}
	cipher, err := ping(c)
	if err != nil || cipher == "" {
		t.Fatalf("over TLS: cipher %q, %v", cipher, err)
	}
	c.TLS.CAFile = testenv.OtherCA(t)
	if _, err := ping(c); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a server certificate the CA file did not sign: %v", err)
	}
}
