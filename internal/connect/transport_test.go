package connect

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"seckill-proxy/conf"
	"seckill-proxy/internal/testenv"
)

// saslKafka is the dev stack's SASL_SSL listener as kafka settings, with mechanism, and the
// test's own topics.
func saslKafka(t *testing.T, mechanism string) conf.Kafka {
	dir := testenv.TLS(t)
	testenv.Kafka(t)
	k := conf.Default().Kafka
	k.Topic, k.DeadLetterTopic = "tls-test-"+t.Name(), "tls-test-"+t.Name()+".dlq"
	k.Topic = strings.NewReplacer("/", "-").Replace(k.Topic)
	k.DeadLetterTopic = k.Topic + ".dlq"
	k.Partitions = 1
	k.Brokers = []string{testenv.KafkaSASLSSL}
	k.DialTimeout = 5 * time.Second
	k.TLS = conf.TLS{Enabled: true, CAFile: filepath.Join(dir, "ca.pem")}
	k.SASL = conf.SASL{Mechanism: mechanism, Username: testenv.KafkaSASLUser, Password: testenv.KafkaSASLPassword}
	return k
}

// produce sends one message to k's topic with k's settings, after creating the topic (the
// cluster admin over the same transport) if it is missing.
func produce(t *testing.T, k conf.Kafka) error {
	t.Helper()
	if err := EnsureTopics(k); err != nil {
		return err
	}
	t.Cleanup(func() { testenv.DeleteTopics(t, testenv.Kafka(t), k.Topic, k.DeadLetterTopic) })
	sc, err := Sarama(k)
	if err != nil {
		t.Fatal(err)
	}
	sc.Metadata.Retry.Max, sc.Metadata.Retry.Backoff = 1, 10*time.Millisecond
	sc.Producer.Retry.Max, sc.Producer.Retry.Backoff = 1, 10*time.Millisecond
	p, err := sarama.NewSyncProducer(k.Brokers, sc)
	if err != nil {
		return err
	}
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: k.Topic, Value: sarama.StringEncoder("order")})
	return err
}

// TestKafkaSASLSSL: the producer reaches a SASL_SSL listener with each mechanism (Confluent
// Cloud's PLAIN, MSK's SCRAM), and is refused with a wrong password, without TLS, or by a CA
// that did not sign the broker's certificate. A SCRAM password file is read again for each
// connection: a rotated password is taken with no restart.
func TestKafkaSASLSSL(t *testing.T) {
	for _, m := range []string{conf.SASLPlain, conf.SASLSCRAM256, conf.SASLSCRAM512} {
		t.Run(m, func(t *testing.T) {
			if err := produce(t, saslKafka(t, m)); err != nil {
				t.Fatalf("%s over TLS: %v", m, err)
			}
			bad := saslKafka(t, m)
			bad.SASL.Password = "wrong"
			if err := produce(t, bad); err == nil {
				t.Fatal("a wrong password was let in")
			}
		})
	}
	plain := saslKafka(t, conf.SASLSCRAM256)
	plain.TLS = conf.TLS{}
	if err := produce(t, plain); err == nil {
		t.Fatal("a client without TLS got through the SASL_SSL listener")
	}
	wrongCA := saslKafka(t, conf.SASLPlain)
	wrongCA.TLS.CAFile = testenv.OtherCA(t)
	if err := produce(t, wrongCA); err == nil {
		t.Fatal("a broker whose certificate the CA file did not sign was trusted")
	}
	dir := t.TempDir()

	pwFile := filepath.Join(dir, "password")
	_ = os.WriteFile(pwFile, []byte("wrong\n"), 0o600)
	rotated := saslKafka(t, conf.SASLSCRAM512)
	rotated.SASL.Password, rotated.SASL.PasswordFile = "", pwFile
	if err := produce(t, rotated); err == nil {
		t.Fatal("the wrong password in the file was let in")
	}
	_ = os.WriteFile(pwFile, []byte(testenv.KafkaSASLPassword+"\n"), 0o600)
	if err := produce(t, rotated); err != nil {
		t.Fatalf("after the password file was rotated: %v", err)
	}
}

// TestRedisTLS: a go-redis client made by Redis, and the dialer the pass-through uses, reach
// Redis's TLS port, verifying its certificate, with the client's own certificate too.
func TestRedisTLS(t *testing.T) {
	dir := testenv.TLS(t)
	testenv.Redis(t)
	c := conf.Default().Redis
	c.Mode, c.Addrs = conf.ModeStandalone, []string{testenv.RedisTLSAddr}
	c.TLS = conf.TLS{Enabled: true, CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client.key")}
	rc := Redis(c)
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if got, err := rc.Ping(ctx).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING over TLS: %q, %v", got, err)
	}
	tc, err := RedisTLS(c)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := Dialer{Timeout: time.Second, TLS: tc}.DialContext(ctx, "tcp", testenv.RedisTLSAddr)
	if err != nil {
		t.Fatalf("the pass-through dialer: %v", err)
	}
	_ = nc.Close()
	c.TLS.CAFile = filepath.Join(dir, "missing.pem")
	if _, err := RedisTLS(c); err == nil || !strings.Contains(err.Error(), "redis.tls.ca_file") {
		t.Fatalf("a missing CA file: %v", err)
	}
	broken := Redis(c)
	defer broken.Close()
	bctx, bcancel := context.WithTimeout(ctx, time.Second)
	defer bcancel()
	if err := broken.Ping(bctx).Err(); err == nil {
		t.Fatal("a client whose CA file is missing reached Redis")
	}
	c.TLS.CAFile = testenv.OtherCA(t)
	other := Redis(c)
	defer other.Close()
	if err := other.Ping(bctx).Err(); err == nil {
		t.Fatal("a node whose certificate the CA file did not sign was trusted")
	}
}
