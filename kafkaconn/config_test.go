package kafkaconn_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.yaml.in/yaml/v3"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// parse decodes a `kafka:` block (strict, like the daemons' loader) whose fields after
// brokers are extra, and validates it.
func parse(extra string) (*kafkaconn.Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader([]byte("brokers: [localhost:9092]\n" + extra)))
	dec.KnownFields(true)
	var c kafkaconn.Config
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// TestMapping: tls, sasl and timeout map onto sarama.Config, for the client and the
// producer configs alike.
func TestMapping(t *testing.T) {
	pki := testenv.NewPKI(t)
	tests := []struct {
		name  string
		kafka string
		check func(t *testing.T, c *sarama.Config)
	}{
		{"defaults", "", func(t *testing.T, c *sarama.Config) {
			def := sarama.NewConfig()
			if c.Net.TLS.Enable || c.Net.SASL.Enable || c.Net.ReadTimeout != def.Net.ReadTimeout ||
				c.Net.DialTimeout != def.Net.DialTimeout || c.Producer.Timeout != def.Producer.Timeout {
				t.Errorf("defaults changed: tls %v sasl %v read %v dial %v produce %v", c.Net.TLS.Enable,
					c.Net.SASL.Enable, c.Net.ReadTimeout, c.Net.DialTimeout, c.Producer.Timeout)
			}
		}},
		{"tls system roots", "tls: {enabled: true}", func(t *testing.T, c *sarama.Config) {
			if !c.Net.TLS.Enable || c.Net.TLS.Config == nil || c.Net.TLS.Config.RootCAs != nil ||
				c.Net.TLS.Config.InsecureSkipVerify || len(c.Net.TLS.Config.Certificates) != 0 {
				t.Errorf("tls: %+v", c.Net.TLS)
			}
		}},
		{"tls ca + client cert", "tls: {enabled: true, ca_file: " + pki.CAFile + ", cert_file: " + pki.ClientCert + ", key_file: " + pki.ClientKey + "}",
			func(t *testing.T, c *sarama.Config) {
				tc := c.Net.TLS.Config
				if !c.Net.TLS.Enable || tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.InsecureSkipVerify {
					t.Errorf("tls: %+v", c.Net.TLS)
				}
			}},
		{"tls insecure", "tls: {enabled: true, insecure_skip_verify: true}", func(t *testing.T, c *sarama.Config) {
			if c.Net.TLS.Config == nil || !c.Net.TLS.Config.InsecureSkipVerify {
				t.Errorf("insecure_skip_verify not mapped")
			}
		}},
		{"sasl plain", "sasl: {mechanism: PLAIN, user: svc, password: \"s3cr:t ${x}\"}",
			func(t *testing.T, c *sarama.Config) {
				s := c.Net.SASL
				if !s.Enable || !s.Handshake || s.Mechanism != sarama.SASLTypePlaintext || s.User != "svc" || s.Password != "s3cr:t ${x}" {
					t.Errorf("sasl: enable %v handshake %v mech %q user %q password %q", s.Enable, s.Handshake, s.Mechanism, s.User, s.Password)
				}
			}},
		{"timeout", "timeout: 2s", func(t *testing.T, c *sarama.Config) {
			if c.Net.DialTimeout != 2*time.Second || c.Net.ReadTimeout != 2*time.Second ||
				c.Net.WriteTimeout != 2*time.Second || c.Producer.Timeout != 2*time.Second {
				t.Errorf("timeouts: dial %v read %v write %v produce %v", c.Net.DialTimeout, c.Net.ReadTimeout,
					c.Net.WriteTimeout, c.Producer.Timeout)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parse(tt.kafka)
			if err != nil {
				t.Fatal(err)
			}
			t.Run("client", func(t *testing.T) { tt.check(t, cfg.SaramaConfig()) })
			t.Run("producer", func(t *testing.T) {
				c := cfg.SaramaProducerConfig()
				if !c.Producer.Idempotent || c.Producer.RequiredAcks != sarama.WaitForAll {
					t.Fatalf("producer settings lost")
				}
				tt.check(t, c)
			})
		})
	}
}

// TestValidation: bad settings fail Validate with the field's name.
func TestValidation(t *testing.T) {
	pki := testenv.NewPKI(t)
	cert, key := pki.ClientCert, pki.ClientKey
	notPEM := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct{ name, kafka, want string }{
		{"ca without enabled", "tls: {ca_file: " + cert + "}", "kafka.tls: ca_file"},
		{"insecure without enabled", "tls: {insecure_skip_verify: true}", "need kafka.tls.enabled"},
		{"ca missing", "tls: {enabled: true, ca_file: " + missing + "}", "kafka.tls.ca_file"},
		{"ca not pem", "tls: {enabled: true, ca_file: " + notPEM + "}", "kafka.tls.ca_file: " + notPEM + ": no PEM"},
		{"cert without key", "tls: {enabled: true, cert_file: " + cert + "}", "kafka.tls.key_file: required"},
		{"key without cert", "tls: {enabled: true, key_file: " + key + "}", "kafka.tls.cert_file: required"},
		{"cert/key mismatch", "tls: {enabled: true, cert_file: " + cert + ", key_file: " + notPEM + "}", "kafka.tls.cert_file/key_file"},
		{"unknown tls field", "tls: {enabled: true, verify: false}", "field verify not found"},
		{"sasl unknown mechanism", "sasl: {mechanism: GSSAPI, user: u, password: p}", `kafka.sasl.mechanism: "GSSAPI"`},
		{"sasl lower-case", "sasl: {mechanism: plain, user: u, password: p}", `kafka.sasl.mechanism: "plain"`},
		{"sasl scram lower-case", "sasl: {mechanism: scram-sha-256, user: u, password: p}", `kafka.sasl.mechanism: "scram-sha-256"`},
		{"sasl scram no password", "sasl: {mechanism: SCRAM-SHA-512, user: u}", "kafka.sasl.password: required for SCRAM-SHA-512"},
		{"sasl no user", "sasl: {mechanism: PLAIN, password: p}", "kafka.sasl.user: required"},
		{"sasl no password", "sasl: {mechanism: PLAIN, user: u}", "kafka.sasl.password: required"},
		{"sasl user without mechanism", "sasl: {user: u, password: p}", "kafka.sasl.mechanism: required"},
		{"negative timeout", "timeout: -1s", "kafka.timeout: -1s is negative (0 takes the default)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(tt.kafka)
			if err == nil {
				t.Fatalf("no error")
			}
			// an unknown field is the YAML decoder's error; every other one is Validate's
			if tt.name != "unknown tls field" && !errors.Is(err, kafkaconn.ErrConfig) {
				t.Errorf("error %q does not wrap ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q: want one containing %q", err, tt.want)
			}
		})
	}
}

// TestValidateReportsAll: every problem is reported at once.
func TestValidateReportsAll(t *testing.T) {
	c := kafkaconn.Config{Timeout: -1, SASL: kafkaconn.SASL{Mechanism: "PLAIN"}}
	err := c.Validate()
	if !errors.Is(err, kafkaconn.ErrConfig) {
		t.Errorf("Validate = %v, want ErrConfig", err)
	}
	for _, want := range []string{"kafka.brokers: required", "kafka.timeout", "kafka.sasl.user", "kafka.sasl.password"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to contain %q", err, want)
		}
	}
}

// TestApplyWithoutValidate: a Config used without Validate still applies its TLS files.
func TestApplyWithoutValidate(t *testing.T) {
	pki := testenv.NewPKI(t)
	c := kafkaconn.Config{Brokers: []string{"b:9092"}, ClientID: "id", TLS: kafkaconn.TLS{Enabled: true, CAFile: pki.CAFile}}
	sc := c.SaramaConfig()
	if sc.ClientID != "id" || !sc.Net.TLS.Enable || sc.Net.TLS.Config == nil || sc.Net.TLS.Config.RootCAs == nil {
		t.Fatalf("client id %q, tls %+v", sc.ClientID, sc.Net.TLS)
	}
	if sc.Version != kafkaconn.Version {
		t.Fatalf("version %v, want the pinned %v", sc.Version, kafkaconn.Version)
	}
}

// TestApplyEditedCopy: a copy of a validated Config with other TLS settings connects with
// its own settings, not the ones its original loaded.
func TestApplyEditedCopy(t *testing.T) {
	pki := testenv.NewPKI(t)
	c := kafkaconn.Config{Brokers: []string{"b:9092"}, TLS: kafkaconn.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := len(c.SaramaConfig().Net.TLS.Config.Certificates); got != 1 {
		t.Fatalf("the validated config has %d client certificates, want 1", got)
	}
	edited := c
	edited.TLS.CertFile, edited.TLS.KeyFile = "", ""
	if got := len(edited.SaramaConfig().Net.TLS.Config.Certificates); got != 0 {
		t.Fatalf("the copy without a client certificate presents %d", got)
	}
	if got := len(c.SaramaConfig().Net.TLS.Config.Certificates); got != 1 {
		t.Fatalf("the original lost its client certificate: %d", got)
	}
}

// TestFlags: the flags fill a Config as its YAML does; the password comes from a file or
// a variable, never from a flag of its own.
func TestFlags(t *testing.T) {
	pki := testenv.NewPKI(t)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := kafkaconn.Config{Brokers: []string{"default:9092"}, ClientID: "tool"}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs, "kafka-")
	if fs.Lookup("kafka-sasl-password") != nil {
		t.Fatal("a password flag exists")
	}
	err := fs.Parse([]string{"-kafka-brokers", "a:1, b:2", "-kafka-tls", "-kafka-ca-file", pki.CAFile, "-kafka-timeout", "3s",
		"-kafka-sasl-mechanism", "SCRAM-SHA-512", "-kafka-sasl-user", "u", "-kafka-sasl-password-file", pw})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Brokers, ",") != "a:1,b:2" || !c.TLS.Enabled || c.TLS.CAFile != pki.CAFile || c.Timeout != 3*time.Second ||
		c.SASL.Mechanism != "SCRAM-SHA-512" || c.SASL.User != "u" || c.SASL.Password != "s3cret" || c.ClientID != "tool" {
		t.Fatalf("flags gave %+v (password %q)", c, c.SASL.Password)
	}
	t.Setenv("TEST_KAFKA_PW", "from-env")
	if err := fs.Parse([]string{"-kafka-sasl-password-env", "TEST_KAFKA_PW"}); err != nil || c.SASL.Password != "from-env" {
		t.Fatalf("password from env: %v %q", err, c.SASL.Password)
	}
	if err := fs.Parse([]string{"-kafka-sasl-password-env", "TEST_KAFKA_PW_UNSET"}); err == nil {
		t.Fatal("an unset variable was accepted")
	}
}

// TestRedacted: a Config printed with %v, %+v or %#v never shows the password.
func TestRedacted(t *testing.T) {
	c := kafkaconn.Config{Brokers: []string{"b:1"}, SASL: kafkaconn.SASL{Mechanism: "PLAIN", User: "u", Password: "s3cret-pw"}}
	for _, f := range []string{"%v", "%+v", "%s", "%#v"} {
		if s := fmt.Sprintf(f, c); strings.Contains(s, "s3cret-pw") || !strings.Contains(s, "u") {
			t.Errorf("%s: %s", f, s)
		}
		if s := fmt.Sprintf(f, c.SASL); strings.Contains(s, "s3cret-pw") {
			t.Errorf("%s of SASL: %s", f, s)
		}
	}
}

// TestWarnings: what Validate accepts but weakens the connection is warned of — SASL PLAIN
// without TLS (the password in the clear), a broker certificate not verified — and logged
// by LogWarnings, never with the password; a sound connection has none.
func TestWarnings(t *testing.T) {
	for name, c := range map[string]struct {
		cfg  kafkaconn.Config
		want []string
	}{
		"plaintext, no SASL":      {kafkaconn.Config{Brokers: []string{"b:9092"}}, nil},
		"SCRAM without TLS":       {kafkaconn.Config{Brokers: []string{"b:9092"}, SASL: kafkaconn.SASL{Mechanism: kafkaconn.SASLScramSHA512, User: "u", Password: "pw-SECRET"}}, nil},
		"PLAIN over TLS":          {kafkaconn.Config{Brokers: []string{"b:9092"}, TLS: kafkaconn.TLS{Enabled: true}, SASL: kafkaconn.SASL{Mechanism: kafkaconn.SASLPlain, User: "u", Password: "pw-SECRET"}}, nil},
		"PLAIN without TLS":       {kafkaconn.Config{Brokers: []string{"b:9092"}, SASL: kafkaconn.SASL{Mechanism: kafkaconn.SASLPlain, User: "u", Password: "pw-SECRET"}}, []string{"kafka.sasl.mechanism"}},
		"certificate not checked": {kafkaconn.Config{Brokers: []string{"b:9092"}, TLS: kafkaconn.TLS{Enabled: true, InsecureSkipVerify: true}}, []string{"kafka.tls.insecure_skip_verify"}},
	} {
		got := c.cfg.Warnings()
		if len(got) != len(c.want) {
			t.Errorf("%s: %q, want %d warning(s)", name, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.HasPrefix(got[i], w) {
				t.Errorf("%s: %q does not start with %q", name, got[i], w)
			}
		}
		var logs bytes.Buffer
		c.cfg.LogWarnings(slog.New(slog.NewTextHandler(&logs, nil)))
		if n := strings.Count(logs.String(), "level=WARN"); n != len(c.want) || strings.Contains(logs.String(), "SECRET") {
			t.Errorf("%s: logged %d warnings, want %d (no password):\n%s", name, n, len(c.want), logs.String())
		}
	}
}
