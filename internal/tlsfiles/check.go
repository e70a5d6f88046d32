package tlsfiles

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"seckill-proxy/conf"
)

// ExpiryWarning is how close to its expiry a certificate makes -check-config warn.
const ExpiryWarning = 14 * 24 * time.Hour

// Warnings are -check-config's words on every certificate the configuration names (conf's
// CertificateWarnings): one that cannot be read, or that expires within ExpiryWarning.
func Warnings(c conf.Config, now time.Time) []string {
	files := map[string]string{}
	add := func(field, path string) {
		if path != "" {
			files[field] = path
		}
	}
	for field, t := range map[string]conf.TLS{"redis.tls": c.Redis.TLS, "kafka.tls": c.Kafka.TLS, "mysql.tls": c.MySQL.TLS} {
		if t.Enabled {
			add(field+".ca_file", t.CAFile)
			add(field+".cert_file", t.CertFile)
		}
	}
	for field, t := range map[string]conf.ServerTLS{"tls": c.TLS, "admin_tls": c.AdminTLS} {
		add(field+".cert_file", t.CertFile)
		add(field+".client_ca_file", t.ClientCAFile)
	}
	var w []string
	for _, field := range slices.Sorted(maps.Keys(files)) {
		b, err := ReadFile(files[field])
		if err != nil {
			w = append(w, fmt.Sprintf("%s: %v", field, err))
			continue
		}
		found := false
		for rest := b; ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			if blk.Type != "CERTIFICATE" {
				continue
			}
			cert, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				w = append(w, fmt.Sprintf("%s: %v", field, err))
				break
			}
			found = true
			if left := cert.NotAfter.Sub(now); left < ExpiryWarning {
				w = append(w, fmt.Sprintf("%s: the certificate %q in %s expires %s (in %s)", field, cert.Subject.CommonName, files[field],
					cert.NotAfter.UTC().Format(time.RFC3339), left.Round(time.Hour)))
			}
		}
		if !found {
			w = append(w, fmt.Sprintf("%s: %s holds no PEM certificate", field, files[field]))
		}
	}
	return w
}

// Collector gives every certificate read so far to Prometheus: when it expires
// (seckill_tls_certificate_expiry_seconds, a Unix time, by setting) and how many reads of a
// changed file failed (seckill_tls_reload_failures_total).
func Collector() prometheus.Collector { return collector{} }

var (
	expiryDesc = prometheus.NewDesc("seckill_tls_certificate_expiry_seconds",
		"When the certificate (or the earliest of a CA file's) in use expires, Unix seconds.", []string{"setting"}, nil)
	failuresDesc = prometheus.NewDesc("seckill_tls_reload_failures_total",
		"Reads of a changed TLS file that failed (the last good certificate stayed in use).", []string{"setting"}, nil)
)

type collector struct{}

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- expiryDesc
	ch <- failuresDesc
}

func (collector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range Expiries() {
		ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(e.NotAfter.Unix()), e.Setting)
		ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.CounterValue, float64(e.Failures), e.Setting)
	}
}
