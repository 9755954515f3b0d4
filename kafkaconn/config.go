package kafkaconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/IBM/sarama"
)

// Config is one Kafka connection. The zero value of every field but Brokers is usable:
// plaintext, no authentication, sarama's timeouts. ClientID has no default here; each
// component sets its own before Validate.
type Config struct {
	// Brokers are the bootstrap addresses (required).
	Brokers []string `yaml:"brokers"`
	// ClientID names the client in the broker's logs and quotas.
	ClientID string `yaml:"client_id"`
	// Timeout is the network timeout (dial, read, write) of every request, and caps a
	// producer's produce timeout; 0 = sarama's 30s.
	Timeout time.Duration `yaml:"timeout"`
	// TLS and SASL of the connections.
	TLS  TLS  `yaml:"tls"`
	SASL SASL `yaml:"sasl"`

	tlsConfig *tls.Config // loaded by Validate from tlsFrom
	tlsFrom   TLS         // TLS as Validate loaded it: a copy with other TLS settings reloads
}

// TLS is the TLS setting of a connection (kafka.tls).
type TLS struct {
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

// SASL is the SASL authentication of a connection (kafka.sasl).
type SASL struct {
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

// Validate checks c and loads the TLS files, so that a missing or malformed file is a
// start-up error naming its field. Errors wrap ErrConfig and name the fields as they are
// written under a `kafka:` YAML key (kafka.tls.ca_file), the same path whether the Config
// comes from a file, from flags or from code; all problems are reported, joined. Zero
// values take the documented defaults; a negative Timeout is refused.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(c.Brokers) == 0 {
		bad("kafka.brokers: required")
	}
	if c.Timeout < 0 {
		bad("kafka.timeout: %v is negative (0 takes the default)", c.Timeout)
	}
	t := &c.TLS
	c.tlsConfig = nil
	if !t.Enabled {
		if t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify {
			bad("kafka.tls: ca_file, cert_file, key_file and insecure_skip_verify need kafka.tls.enabled: true")
		}
	} else if tc, err := t.config(); err != nil {
		errs = append(errs, err)
	} else {
		c.tlsConfig, c.tlsFrom = tc, *t
	}
	s := &c.SASL
	switch s.Mechanism {
	case "":
		if s.User != "" || s.Password != "" {
			bad("kafka.sasl.mechanism: required when kafka.sasl.user or password is set (PLAIN)")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if s.User == "" {
			bad("kafka.sasl.user: required for %s", s.Mechanism)
		}
		if s.Password == "" {
			bad("kafka.sasl.password: required for %s", s.Mechanism)
		}
	default:
		bad("kafka.sasl.mechanism: %q must be %s, %s or %s", s.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// Warnings are the settings of c that Validate accepts but that weaken the connection, one
// sentence each naming its field: SASL PLAIN without TLS (the password crosses the network
// in the clear, as every record does), and a broker certificate that is not verified
// (anyone on the path can stand in for the broker and read the password and the records).
// Nil when there are none. They hold no secret.
func (c *Config) Warnings() []string {
	var out []string
	if c.SASL.Mechanism == SASLPlain && !c.TLS.Enabled {
		out = append(out, "kafka.sasl.mechanism: PLAIN without kafka.tls.enabled: the SASL password and every record cross the network in the clear (enable TLS, or use SCRAM-SHA-512)")
	}
	if c.TLS.Enabled && c.TLS.InsecureSkipVerify {
		out = append(out, "kafka.tls.insecure_skip_verify: the broker's certificate is not verified: anyone on the network path can stand in for the broker and read what is sent (tests only)")
	}
	return out
}

// LogWarnings logs each of c's Warnings at Warn on log. Each component built on a Config
// (the distributor, the player, saramapc) calls it once, when it is created, so that an
// accepted but weak setting is never silent.
func (c *Config) LogWarnings(log *slog.Logger) {
	for _, w := range c.Warnings() {
		log.Warn("weak Kafka connection setting", "warning", w)
	}
}

// config builds the tls.Config of t, reading its files.
func (t *TLS) config() (*tls.Config, error) {
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
		return nil, errors.New("kafka.tls.cert_file: required with kafka.tls.key_file")
	case t.KeyFile == "":
		return nil, errors.New("kafka.tls.key_file: required with kafka.tls.cert_file")
	default:
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Apply sets c's TLS, SASL and timeout on sc. A Config that was not validated, or whose TLS
// settings changed since (an edited copy), loads its TLS files here; one whose files do not
// load leaves TLS enabled without them, and the connection then fails (Validate reports
// the reason).
func (c *Config) Apply(sc *sarama.Config) {
	if c.TLS.Enabled {
		sc.Net.TLS.Enable = true
		tc := c.tlsConfig
		if tc == nil || c.tlsFrom != c.TLS {
			tc, _ = c.TLS.config()
		}
		sc.Net.TLS.Config = tc.Clone()
	}
	if c.SASL.Mechanism != "" {
		sc.Net.SASL.Enable = true
		sc.Net.SASL.Handshake = true
		sc.Net.SASL.Mechanism = sarama.SASLMechanism(c.SASL.Mechanism)
		sc.Net.SASL.User = c.SASL.User
		sc.Net.SASL.Password = c.SASL.Password
		if c.SASL.Mechanism != SASLPlain {
			sc.Net.SASL.SCRAMClientGeneratorFunc = newSCRAMClient(c.SASL.Mechanism)
		}
	}
	if c.Timeout > 0 {
		sc.Net.DialTimeout = c.Timeout
		sc.Net.ReadTimeout = c.Timeout
		sc.Net.WriteTimeout = c.Timeout
		// the broker must answer a produce request before the client gives up on it
		sc.Producer.Timeout = min(sc.Producer.Timeout, c.Timeout)
	}
}

// SaramaConfig is NewConfig(c.ClientID) with c applied: the config of a client, a
// consumer or an admin.
func (c *Config) SaramaConfig() *sarama.Config {
	sc := NewConfig(c.ClientID)
	c.Apply(sc)
	return sc
}

// SaramaProducerConfig is ProducerConfig(c.ClientID) with c applied.
func (c *Config) SaramaProducerConfig() *sarama.Config {
	sc := ProducerConfig(c.ClientID)
	c.Apply(sc)
	return sc
}

// Summary is the connection as log attributes, without the password: brokers, client id,
// TLS, SASL mechanism and user.
func (c *Config) Summary() []any {
	return []any{"brokers", c.Brokers, "client_id", c.ClientID, "tls", c.TLS.Enabled, "sasl", c.SASL.Mechanism, "sasl_user", c.SASL.User}
}
