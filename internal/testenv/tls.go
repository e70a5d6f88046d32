package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The dev stack's TLS services (scripts/devstack.sh): a standalone Redis's TLS port, Kafka's
// SASL_SSL listener with its user, and MariaDB's user that may log in over TLS only.
const (
	RedisTLSAddr      = "127.0.0.1:7011"
	KafkaSASLSSL      = "127.0.0.1:9094"
	KafkaSASLUser     = "seckill"
	KafkaSASLPassword = "seckill-secret"
	MySQLTLSUser      = "seckill_tls"
	MySQLTLSPassword  = "tls-secret"
)

// TLS is the dev stack's directory of certificates (tls in StackDir): ca.pem, server.pem and
// server.key, client.pem and client.key. A test that needs them skips, or fails with
// SECKILL_REQUIRE_SERVICES=1, when they are missing.
func TLS(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(StackDir(t), "tls")
	for _, f := range []string{"ca.pem", "server.pem", "server.key", "client.pem", "client.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			missing(t, "the dev stack's TLS certificates", err)
		}
	}
	return dir
}

// OtherCA writes a CA certificate that signed none of the dev stack's certificates to a
// file of the test's own, and returns its path: a client that trusts only it must refuse the
// services.
func OtherCA(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "other-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
