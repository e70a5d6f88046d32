package connect

import (
	"fmt"
	"strings"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"seckill-proxy/conf"
	"seckill-proxy/internal/tlsfiles"
)

// kafkaTransport sets Sarama's TLS and SASL from c (Confluent Cloud's SASL_SSL, MSK's TLS
// with SCRAM).
func kafkaTransport(sc *sarama.Config, c conf.Kafka) error {
	tc, err := tlsfiles.Client("kafka.tls", c.TLS, nil)
	if err != nil {
		return err
	}
	if tc != nil {
		sc.Net.TLS.Enable, sc.Net.TLS.Config = true, tc
	}
	s := c.SASL
	if s.Mechanism == "" {
		return nil
	}
	password := func() (string, error) { return s.Password, nil }
	if s.PasswordFile != "" {
		password = func() (string, error) { return readSecret(s.PasswordFile) }
	}
	pw, err := password()
	if err != nil {
		return fmt.Errorf("kafka.sasl.password_file: %w", err)
	}
	sc.Net.SASL.Enable = true
	sc.Net.SASL.Handshake = true
	sc.Net.SASL.User, sc.Net.SASL.Password = s.Username, pw
	switch strings.ToUpper(s.Mechanism) {
	case conf.SASLPlain:
		sc.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case conf.SASLSCRAM256:
		sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA256, password: password} }
	case conf.SASLSCRAM512:
		sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512, password: password} }
	default:
		return fmt.Errorf("kafka.sasl.mechanism %q: must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
	}
	return nil
}

// readSecret reads a secret file (bounded as TLS files are), its trailing newline dropped.
func readSecret(path string) (string, error) {
	b, err := tlsfiles.ReadFile(path)
	if err != nil {
		return "", err
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}

// scramClient is Sarama's SCRAM client over xdg-go/scram. Each connection makes one, and
// reads the password then: a password file that changed is used by the next connection.
type scramClient struct {
	hash     scram.HashGeneratorFcn
	password func() (string, error)
	conv     *scram.ClientConversation
}

func (c *scramClient) Begin(user, _, authzID string) error {
	pw, err := c.password()
	if err != nil {
		return err
	}
	client, err := c.hash.NewClient(user, pw, authzID)
	if err != nil {
		return err
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }
