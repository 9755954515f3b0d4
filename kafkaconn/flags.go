package kafkaconn

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// RegisterFlags registers the fields of c as command-line flags named prefix + the YAML
// path (prefix "kafka-": -kafka-brokers, -kafka-tls, -kafka-ca-file, -kafka-cert-file,
// -kafka-key-file, -kafka-insecure-skip-verify, -kafka-sasl-mechanism, -kafka-sasl-user,
// -kafka-timeout), each defaulting to c's current value. The SASL password is never a
// flag (other users see a command line): -kafka-sasl-password-file reads it from a file,
// -kafka-sasl-password-env from an environment variable. Validate c after the flags are
// parsed.
func (c *Config) RegisterFlags(fs *flag.FlagSet, prefix string) {
	fs.Func(prefix+"brokers", "Kafka bootstrap brokers, comma-separated (default "+strings.Join(c.Brokers, ",")+")", func(v string) error {
		c.Brokers = nil
		for _, b := range strings.Split(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				c.Brokers = append(c.Brokers, b)
			}
		}
		return nil
	})
	fs.StringVar(&c.ClientID, prefix+"client-id", c.ClientID, "Kafka client id")
	fs.DurationVar(&c.Timeout, prefix+"timeout", c.Timeout, "network timeout of every Kafka request (0: 30s)")
	fs.BoolVar(&c.TLS.Enabled, prefix+"tls", c.TLS.Enabled, "connect to Kafka over TLS")
	fs.StringVar(&c.TLS.CAFile, prefix+"ca-file", c.TLS.CAFile, "PEM CAs that verify the brokers (with -"+prefix+"tls; default: the system's)")
	fs.StringVar(&c.TLS.CertFile, prefix+"cert-file", c.TLS.CertFile, "PEM client certificate for Kafka (mutual TLS), with -"+prefix+"key-file")
	fs.StringVar(&c.TLS.KeyFile, prefix+"key-file", c.TLS.KeyFile, "PEM key of -"+prefix+"cert-file")
	fs.BoolVar(&c.TLS.InsecureSkipVerify, prefix+"insecure-skip-verify", c.TLS.InsecureSkipVerify, "do not verify the brokers' certificates (tests only)")
	fs.StringVar(&c.SASL.Mechanism, prefix+"sasl-mechanism", c.SASL.Mechanism, "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&c.SASL.User, prefix+"sasl-user", c.SASL.User, "SASL user")
	fs.Func(prefix+"sasl-password-file", "file holding the SASL password", func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		c.SASL.Password = strings.TrimRight(string(b), "\r\n")
		return nil
	})
	fs.Func(prefix+"sasl-password-env", "environment variable holding the SASL password", func(name string) error {
		v, ok := os.LookupEnv(name)
		if !ok {
			return fmt.Errorf("environment variable %s is not set", name)
		}
		if v == "" {
			return errors.New("empty password")
		}
		c.SASL.Password = v
		return nil
	})
}

// String describes c without its SASL password, so that a Config printed in a log or an
// error never shows the secret.
func (c Config) String() string {
	return fmt.Sprintf("{Brokers:%v ClientID:%s Timeout:%s TLS:%+v SASL:%s}", c.Brokers, c.ClientID, c.Timeout, c.TLS, c.SASL)
}

// String describes s without its password.
func (s SASL) String() string {
	pw := ""
	if s.Password != "" {
		pw = "[redacted]"
	}
	return fmt.Sprintf("{Mechanism:%s User:%s Password:%s}", s.Mechanism, s.User, pw)
}

// GoString is String: %#v does not show the password either.
func (s SASL) GoString() string { return "kafkaconn.SASL" + s.String() }
