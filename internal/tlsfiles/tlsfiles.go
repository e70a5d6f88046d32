// Package tlsfiles makes the TLS configurations of every hop (Redis, Kafka, MySQL, the RESP
// and admin listeners) from PEM files, and reads the files again when they change: a
// Kubernetes secret mount or cert-manager's rotation takes effect with no restart. A
// connection made after the change uses the new files; one open already is not touched. A file
// replaced by something that does not parse (half written, garbage, a key that does not match)
// keeps the last good certificate, with an error in the log and in the reload-failure metric.
// Each certificate's expiry is a metric too (Collector), and Expiring lists those close to it
// for -check-config.
package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/conf"
)

// CheckEvery is how often, at most, a connection's handshake looks at the files again.
const CheckEvery = time.Second

// checkEvery is CheckEvery, which tests shorten.
var checkEvery = CheckEvery

// MaxFile bounds a PEM file read.
const MaxFile = 1 << 20

// source is a certificate and key, or a CA bundle, read from files and read again when they
// change.
type source struct {
	name       string // what it is for, in logs and metrics: "redis.tls.cert_file"
	certFile   string
	keyFile    string // empty for a CA bundle
	log        *zap.Logger
	checked    atomic.Int64 // unix nanoseconds of the last look at the files
	mu         sync.Mutex
	stamp      string // the files' sizes and modification times when last read
	cert       atomic.Pointer[tls.Certificate]
	pool       atomic.Pointer[x509.CertPool]
	notAfter   atomic.Int64 // the leaf's (or the earliest CA's) expiry, unix seconds
	failures   atomic.Int64
	lastFailed atomic.Bool
}

var (
	registry   sync.Mutex
	registered []*source
)

// newSource reads the files once: an error here stops the binary (a bad file at start is a
// bad configuration), where a bad file later keeps the old one.
func newSource(name, certFile, keyFile string, log *zap.Logger) (*source, error) {
	if log == nil {
		log = zap.L()
	}
	registry.Lock()
	for _, s := range registered {
		if s.name == name && s.certFile == certFile && s.keyFile == keyFile {
			registry.Unlock()
			return s, nil
		}
	}
	registry.Unlock()
	s := &source{name: name, certFile: certFile, keyFile: keyFile, log: log}
	stamp, err := s.stampNow()
	if err == nil {
		err = s.load(stamp)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s.checked.Store(time.Now().UnixNano())
	registry.Lock()
	defer registry.Unlock()
	for _, o := range registered {
		if o.name == name && o.certFile == certFile && o.keyFile == keyFile {
			return o, nil
		}
	}
	registered = append(registered, s)
	return s, nil
}

func (s *source) files() []string {
	if s.keyFile == "" {
		return []string{s.certFile}
	}
	return []string{s.certFile, s.keyFile}
}

// stampNow is the files' sizes and modification times (a symlink swap, as a secret mount
// does, changes them).
func (s *source) stampNow() (string, error) {
	var b bytes.Buffer
	for _, f := range s.files() {
		st, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("%s is not a regular file", f)
		}
		fmt.Fprintf(&b, "%s:%d:%d;", f, st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}

// ReadFile reads a PEM or secret file of at most MaxFile bytes.
func ReadFile(path string) ([]byte, error) {
	// Opened without blocking, then looked at: a FIFO (or a device) in a file's place would
	// hold the read, and a start-up with it, for ever, deaf to SIGTERM.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxFile)
	}
	return b, nil
}

// load reads and parses the files; on success they replace what was held.
func (s *source) load(stamp string) error {
	certPEM, err := ReadFile(s.certFile)
	if err != nil {
		return err
	}
	if s.keyFile == "" {
		pool := x509.NewCertPool()
		var earliest int64
		for rest := certPEM; ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return fmt.Errorf("%s: %w", s.certFile, err)
			}
			pool.AddCert(c)
			if t := c.NotAfter.Unix(); earliest == 0 || t < earliest {
				earliest = t
			}
		}
		if earliest == 0 {
			return fmt.Errorf("%s holds no PEM certificate", s.certFile)
		}
		s.pool.Store(pool)
		s.notAfter.Store(earliest)
		s.stamp = stamp
		return nil
	}
	keyPEM, err := ReadFile(s.keyFile)
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("%s and %s: %w", s.certFile, s.keyFile, err)
	}
	s.cert.Store(&cert)
	s.notAfter.Store(cert.Leaf.NotAfter.Unix())
	s.stamp = stamp
	return nil
}

// refresh reads the files again if they changed, at most once per CheckEvery.
func (s *source) refresh() {
	now := time.Now().UnixNano()
	last := s.checked.Load()
	if now-last < int64(checkEvery) || !s.checked.CompareAndSwap(last, now) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stamp, err := s.stampNow()
	if err == nil && stamp == s.stamp {
		return
	}
	if err == nil {
		err = s.load(stamp)
	}
	if err != nil {
		s.failures.Add(1)
		if !s.lastFailed.Swap(true) {
			s.log.Error("a TLS file changed and cannot be used; the last good one stays in use", zap.String("setting", s.name), zap.Error(err))
		}
		return
	}
	s.lastFailed.Store(false)
	s.log.Info("TLS files read again", zap.String("setting", s.name), zap.Time("not_after", time.Unix(s.notAfter.Load(), 0)))
}

func (s *source) certificate() *tls.Certificate {
	s.refresh()
	return s.cert.Load()
}

func (s *source) certPool() *x509.CertPool {
	s.refresh()
	return s.pool.Load()
}

// Client is the TLS configuration of a client of a service (nil when c is off); field names
// the settings in errors and metrics ("kafka.tls"), and log, if nil, is zap's global logger. The CA file
// and the client certificate are read again when they change; serverName is the name to
// verify when c gives none (the host dialled, for a client that does not set it itself).
func Client(field string, c conf.TLS, log *zap.Logger) (*tls.Config, error) {
	if !c.Enabled {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CertFile != "" {
		src, err := newSource(field+".cert_file", c.CertFile, c.KeyFile, log)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return src.certificate(), nil
		}
	}
	if c.CAFile != "" {
		ca, err := newSource(field+".ca_file", c.CAFile, "", log)
		if err != nil {
			return nil, err
		}
		// Go verifies against a fixed RootCAs; to take a CA file that changed, the check is
		// made here, as the standard one would be, against the pool read last.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return verifyServer(cs, ca.certPool())
		}
	}
	return cfg, nil
}

// verifyServer verifies a server's chain against roots, for the name the handshake was for.
func verifyServer(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, DNSName: cs.ServerName, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// Server is a listener's TLS configuration (nil when s has no certificate): its certificate,
// and with a client CA file, mutual TLS. Both are read again when they change.
func Server(field string, s conf.ServerTLS, log *zap.Logger) (*tls.Config, error) {
	if !s.On() {
		return nil, nil
	}
	src, err := newSource(field+".cert_file", s.CertFile, s.KeyFile, log)
	if err != nil {
		return nil, err
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.ClientCAFile == "" {
		base.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return src.certificate(), nil }
		return base, nil
	}
	ca, err := newSource(field+".client_ca_file", s.ClientCAFile, "", log)
	if err != nil {
		return nil, err
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*src.certificate()},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.certPool()}, nil
	}
	return base, nil
}

// Expiry is one file's certificate expiry, as the metrics and -check-config report it.
type Expiry struct {
	Setting  string
	NotAfter time.Time
	Failures int64 // reads of a changed file that failed
}

// Expiries lists every certificate read so far, in the order they were first read.
func Expiries() []Expiry {
	registry.Lock()
	defer registry.Unlock()
	out := make([]Expiry, 0, len(registered))
	for _, s := range registered {
		out = append(out, Expiry{Setting: s.name, NotAfter: time.Unix(s.notAfter.Load(), 0), Failures: s.failures.Load()})
	}
	return out
}
