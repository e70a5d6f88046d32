package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"seckill-proxy/internal/testenv"
)

// TestAdminTLS runs the real binary with admin_tls: its admin port answers HTTPS with the
// configured certificate (and not plain HTTP), and /metrics gives the certificate's expiry.
func TestAdminTLS(t *testing.T) {
	testenv.Redis(t)
	testenv.Kafka(t)
	testenv.MySQL(t)
	certs := testenv.TLS(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "seckill-proxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr, adminAddr := freeAddr(t), freeAddr(t)
	var logs syncBuffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "SECKILL_LISTEN="+addr, "SECKILL_ADMIN_LISTEN="+adminAddr,
		"SECKILL_ADMIN_TLS_CERT_FILE="+filepath.Join(certs, "server.pem"), "SECKILL_ADMIN_TLS_KEY_FILE="+filepath.Join(certs, "server.key"))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("proxy log:\n%s", logs.String())
		}
	})
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(filepath.Join(certs, "ca.pem"))
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(url string) (int, string) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, "the admin port over HTTPS", func() bool { code, _ := get("https://" + adminAddr + "/livez"); return code == http.StatusOK })
	if code, body := get("http://" + adminAddr + "/livez"); code == http.StatusOK {
		t.Fatalf("plain HTTP on an HTTPS admin port answered %d %q", code, body)
	}
	code, body := get("https://" + adminAddr + "/metrics")
	if code != http.StatusOK || !strings.Contains(body, `seckill_tls_certificate_expiry_seconds{setting="admin_tls.cert_file"}`) {
		t.Fatalf("/metrics: %d, no certificate expiry in it", code)
	}
}

// TestCheckConfigWarnsOfExpiry: -check-config names a certificate that expires within 14
// days, and one that cannot be read; -strict refuses the configuration for it.
func TestCheckConfigWarnsOfExpiry(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "soon"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(72 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "soon.pem"), filepath.Join(dir, "soon.key")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	bin := filepath.Join(dir, "seckill-proxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "SECKILL_TLS_LISTEN=127.0.0.1:0", "SECKILL_TLS_CERT_FILE="+certFile, "SECKILL_TLS_KEY_FILE="+keyFile,
			"SECKILL_KAFKA_TLS_ENABLED=true", "SECKILL_KAFKA_TLS_CA_FILE="+filepath.Join(dir, "missing.pem"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("-check-config")
	if err != nil || !strings.Contains(out, "tls.cert_file: the certificate \"soon\"") || !strings.Contains(out, "kafka.tls.ca_file:") {
		t.Fatalf("-check-config: %v\n%s", err, out)
	}
	if out, err := run("-check-config", "-strict"); err == nil {
		t.Fatalf("-check-config -strict passed a certificate that expires in 3 days:\n%s", out)
	}
}
