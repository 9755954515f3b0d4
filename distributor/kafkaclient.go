package distributor

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/kafkautil"
)

// KafkaTLS is the TLS setting of the Kafka connections (kafka.tls).
type KafkaTLS struct {
	// Enabled turns TLS on. The other fields are refused when it is false.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the CAs that verify the broker (default: the system pool).
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key (mutual TLS); both or
	// neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// InsecureSkipVerify does not verify the broker's certificate (tests only).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// KafkaSASL is the SASL authentication of the Kafka connections (kafka.sasl).
type KafkaSASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty means no SASL.
	Mechanism string `yaml:"mechanism"`
	User      string `yaml:"user"`
	Password  string `yaml:"password"` // use ${ENV} expansion rather than a literal
}

// SASL mechanisms.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// validateClient checks kafka.tls, kafka.sasl and kafka.timeout and loads the TLS files (so
// a missing or malformed file is a start-up error naming its field).
func (k *KafkaConfig) validateClient(bad func(string, ...any)) {
	if k.Timeout < 0 {
		bad("kafka.timeout: must not be negative")
	}
	t := &k.TLS
	if !t.Enabled {
		if t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify {
			bad("kafka.tls: ca_file, cert_file, key_file and insecure_skip_verify need kafka.tls.enabled: true")
		}
	} else if tc, err := t.config(); err != nil {
		bad("%v", err)
	} else {
		k.tlsConfig = tc
	}
	s := &k.SASL
	switch s.Mechanism {
	case "":
		if s.User != "" || s.Password != "" {
			bad("kafka.sasl.mechanism: required when kafka.sasl.user or password is set (PLAIN)")
		}
		return
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	default:
		bad("kafka.sasl.mechanism: %q must be %s, %s or %s", s.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
		return
	}
	if s.User == "" {
		bad("kafka.sasl.user: required for %s", s.Mechanism)
	}
	if s.Password == "" {
		bad("kafka.sasl.password: required for %s", s.Mechanism)
	}
}

// config builds the tls.Config of t, reading its files.
func (t *KafkaTLS) config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in, documented
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka.tls.ca_file: %s: no PEM certificate found", t.CAFile)
		}
		tc.RootCAs = pool
	}
	switch {
	case t.CertFile == "" && t.KeyFile == "":
	case t.CertFile == "":
		return nil, fmt.Errorf("kafka.tls.cert_file: required with kafka.tls.key_file")
	case t.KeyFile == "":
		return nil, fmt.Errorf("kafka.tls.key_file: required with kafka.tls.cert_file")
	default:
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// applyClient maps the client settings (TLS, SASL, timeout) onto c.
func (k *KafkaConfig) applyClient(c *sarama.Config) {
	if k.TLS.Enabled {
		c.Net.TLS.Enable = true
		tc := k.tlsConfig
		if tc == nil { // not validated through Validate (kept defensive: a config error was reported there)
			tc, _ = k.TLS.config()
		}
		c.Net.TLS.Config = tc.Clone()
	}
	if k.SASL.Mechanism != "" {
		c.Net.SASL.Enable = true
		c.Net.SASL.Handshake = true
		c.Net.SASL.Mechanism = sarama.SASLMechanism(k.SASL.Mechanism)
		c.Net.SASL.User = k.SASL.User
		c.Net.SASL.Password = k.SASL.Password
		if k.SASL.Mechanism != SASLPlain {
			c.Net.SASL.SCRAMClientGeneratorFunc = newSCRAMClient(k.SASL.Mechanism)
		}
	}
	if k.Timeout > 0 {
		c.Net.DialTimeout = k.Timeout
		c.Net.ReadTimeout = k.Timeout
		c.Net.WriteTimeout = k.Timeout
		// the broker must answer a produce request before the client gives up on it
		c.Producer.Timeout = min(c.Producer.Timeout, k.Timeout)
	}
}

// saramaConfig is kafkautil.NewConfig with the client settings applied.
func (k *KafkaConfig) saramaConfig(clientID string) *sarama.Config {
	c := kafkautil.NewConfig(clientID)
	k.applyClient(c)
	return c
}

// producerConfig is kafkautil.ProducerConfig with the client settings applied.
func (k *KafkaConfig) producerConfig() *sarama.Config {
	c := kafkautil.ProducerConfig(k.ClientID)
	k.applyClient(c)
	return c
}
