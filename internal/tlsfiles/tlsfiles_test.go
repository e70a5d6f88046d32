package tlsfiles

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/conf"
)

// authority is a test CA that signs leaf certificates.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newAuthority(t *testing.T, name string) *authority {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &authority{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf signs a certificate for name (a DNS name or an IP), valid for life; it returns the
// certificate's and the key's PEM.
func (a *authority) leaf(t *testing.T, name string, life time.Duration) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(life),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// replace writes b to path as a secret mount does: a new file renamed over the old.
func replace(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	// The file's time must change even on a coarse clock.
	future := time.Now().Add(time.Duration(len(b)) * time.Millisecond)
	_ = os.Chtimes(path, future, future)
}

// handshake runs one TLS handshake between a client and a server config over a loopback
// connection; it returns the server's leaf certificate as the client saw it.
func handshake(t *testing.T, client, server *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		done <- tls.Server(c, server).Handshake()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err != nil {
		<-done
		return nil, err
	}
	defer c.Close()
	if err := <-done; err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

// TestRotation: a server certificate, a client certificate and a CA file replaced on disk are
// used by the next handshake, with no new configuration; a file replaced by garbage keeps the
// last good one, and counts a failure.
func TestRotation(t *testing.T) {
	checkEvery = 0
	t.Cleanup(func() { checkEvery = CheckEvery })
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	ca1 := newAuthority(t, "ca one")
	srvCert, srvKey := ca1.leaf(t, "127.0.0.1", time.Hour)
	cliCert, cliKey := ca1.leaf(t, "client", time.Hour)
	for n, b := range map[string][]byte{"ca.pem": ca1.pem, "srv.pem": srvCert, "srv.key": srvKey, "cli.pem": cliCert, "cli.key": cliKey} {
		if err := os.WriteFile(p(n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	log := zap.NewNop()
	server, err := Server("tls", conf.ServerTLS{CertFile: p("srv.pem"), KeyFile: p("srv.key"), ClientCAFile: p("ca.pem")}, log)
	if err != nil {
		t.Fatal(err)
	}
	client, err := Client("redis.tls", conf.TLS{Enabled: true, CAFile: p("ca.pem"), CertFile: p("cli.pem"), KeyFile: p("cli.key"), ServerName: "127.0.0.1"}, log)
	if err != nil {
		t.Fatal(err)
	}
	first, err := handshake(t, client, server)
	if err != nil {
		t.Fatalf("first handshake: %v", err)
	}

	// cert-manager rotates everything to a new CA.
	ca2 := newAuthority(t, "ca two")
	srvCert2, srvKey2 := ca2.leaf(t, "127.0.0.1", 2*time.Hour)
	cliCert2, cliKey2 := ca2.leaf(t, "client", 2*time.Hour)
	replace(t, p("ca.pem"), ca2.pem)
	replace(t, p("srv.pem"), srvCert2)
	replace(t, p("srv.key"), srvKey2)
	replace(t, p("cli.pem"), cliCert2)
	replace(t, p("cli.key"), cliKey2)
	second, err := handshake(t, client, server)
	if err != nil {
		t.Fatalf("handshake after the rotation: %v", err)
	}
	if second.Issuer.CommonName != "ca two" || second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatalf("after the rotation the server showed %q's certificate %v", second.Issuer.CommonName, second.SerialNumber)
	}

	// A half-written file: the last good certificate stays.
	replace(t, p("srv.pem"), []byte("-----BEGIN CERTIFICATE-----\ngarbage"))
	third, err := handshake(t, client, server)
	if err != nil {
		t.Fatalf("handshake with a garbage file on disk: %v", err)
	}
	if third.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Fatal("a garbage file replaced the certificate in use")
	}
	var failed int64
	for _, e := range Expiries() {
		if e.Setting == "tls.cert_file" {
			failed = e.Failures
		}
	}
	if failed == 0 {
		t.Fatal("the garbage file counted no failure")
	}
}

// TestVerifies: a server whose certificate another CA signed, or that names another host, is
// refused; so is a client with no certificate where one is required.
func TestVerifies(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	ca, other := newAuthority(t, "ca"), newAuthority(t, "other")
	srvCert, srvKey := ca.leaf(t, "redis.internal", time.Hour)
	otherCert, otherKey := other.leaf(t, "redis.internal", time.Hour)
	for n, b := range map[string][]byte{"ca.pem": ca.pem, "srv.pem": srvCert, "srv.key": srvKey, "o.pem": otherCert, "o.key": otherKey} {
		if err := os.WriteFile(p(n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	log := zap.NewNop()
	good, _ := Server("t1", conf.ServerTLS{CertFile: p("srv.pem"), KeyFile: p("srv.key")}, log)
	forged, _ := Server("t2", conf.ServerTLS{CertFile: p("o.pem"), KeyFile: p("o.key")}, log)
	mutual, _ := Server("t3", conf.ServerTLS{CertFile: p("srv.pem"), KeyFile: p("srv.key"), ClientCAFile: p("ca.pem")}, log)
	client, _ := Client("c1", conf.TLS{Enabled: true, CAFile: p("ca.pem"), ServerName: "redis.internal"}, log)
	wrongName, _ := Client("c2", conf.TLS{Enabled: true, CAFile: p("ca.pem"), ServerName: "mysql.internal"}, log)
	if _, err := handshake(t, client, good); err != nil {
		t.Fatalf("a good server: %v", err)
	}
	for name, tt := range map[string]struct{ c, s *tls.Config }{
		"another CA's server":           {client, forged},
		"a certificate of another name": {wrongName, good},
		"no client certificate":         {client, mutual},
	} {
		if _, err := handshake(t, tt.c, tt.s); err == nil {
			t.Errorf("%s: the handshake succeeded", name)
		}
	}
}

// TestBadFilesAtStart: a missing or garbage file at start is an error that names the setting.
func TestBadFilesAtStart(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	_ = os.WriteFile(junk, []byte("not pem"), 0o600)
	for _, c := range []conf.TLS{
		{Enabled: true, CAFile: filepath.Join(dir, "missing.pem")},
		{Enabled: true, CAFile: junk},
		{Enabled: true, CertFile: junk, KeyFile: junk},
	} {
		if _, err := Client("kafka.tls", c, zap.NewNop()); err == nil || !strings.Contains(err.Error(), "kafka.tls.") {
			t.Errorf("%+v: %v, want an error naming the setting", c, err)
		}
	}
	if cfg, err := Client("kafka.tls", conf.TLS{}, zap.NewNop()); cfg != nil || err != nil {
		t.Errorf("TLS off: %v, %v", cfg, err)
	}
}

// TestReadFileRefusesFIFO: a FIFO in a secret's or certificate's place is refused at once,
// not read for ever (a kafka.sasl.password_file that was one held the proxy's start-up, deaf
// to SIGTERM); a directory too.
func TestReadFileRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "password")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("a FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO did not return")
	}
	if _, err := ReadFile(t.TempDir()); err == nil {
		t.Fatal("a directory was read")
	}
}
