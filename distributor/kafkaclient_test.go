package distributor

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// kafkaYAML is a minimal valid config whose kafka section ends with extra (indented by 2).
func kafkaYAML(extra string) string {
	return `
postgres:
  dsn: postgres://u@h/db
kafka:
  brokers: [localhost:9092]
` + extra + `
streams:
  - topic: t
    views:
      - {name: v, sql: SELECT 1 AS id, key: [id]}
`
}

// writePEM writes a self-signed certificate (usable as CA and client cert) and its key.
func writePEM(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "statecast-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestKafkaClientMapping: kafka.tls, kafka.sasl and kafka.timeout map onto sarama.Config,
// for the admin/restore configs and the producer config alike.
func TestKafkaClientMapping(t *testing.T) {
	cert, key := writePEM(t)
	t.Setenv("TEST_KAFKA_PASSWORD", "s3cr:t ${x}")
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
		{"tls system roots", "  tls: {enabled: true}", func(t *testing.T, c *sarama.Config) {
			if !c.Net.TLS.Enable || c.Net.TLS.Config == nil || c.Net.TLS.Config.RootCAs != nil ||
				c.Net.TLS.Config.InsecureSkipVerify || len(c.Net.TLS.Config.Certificates) != 0 {
				t.Errorf("tls: %+v", c.Net.TLS)
			}
		}},
		{"tls ca + client cert", "  tls: {enabled: true, ca_file: " + cert + ", cert_file: " + cert + ", key_file: " + key + "}",
			func(t *testing.T, c *sarama.Config) {
				tc := c.Net.TLS.Config
				if !c.Net.TLS.Enable || tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.InsecureSkipVerify {
					t.Errorf("tls: %+v", c.Net.TLS)
				}
			}},
		{"tls insecure", "  tls: {enabled: true, insecure_skip_verify: true}", func(t *testing.T, c *sarama.Config) {
			if c.Net.TLS.Config == nil || !c.Net.TLS.Config.InsecureSkipVerify {
				t.Errorf("insecure_skip_verify not mapped")
			}
		}},
		{"sasl plain with env password", "  sasl: {mechanism: PLAIN, user: svc, password: \"${TEST_KAFKA_PASSWORD}\"}",
			func(t *testing.T, c *sarama.Config) {
				s := c.Net.SASL
				if !s.Enable || !s.Handshake || s.Mechanism != sarama.SASLTypePlaintext || s.User != "svc" || s.Password != "s3cr:t ${x}" {
					t.Errorf("sasl: enable %v handshake %v mech %q user %q password %q", s.Enable, s.Handshake, s.Mechanism, s.User, s.Password)
				}
			}},
		{"timeout", "  timeout: 2s", func(t *testing.T, c *sarama.Config) {
			if c.Net.DialTimeout != 2*time.Second || c.Net.ReadTimeout != 2*time.Second ||
				c.Net.WriteTimeout != 2*time.Second || c.Producer.Timeout != 2*time.Second {
				t.Errorf("timeouts: dial %v read %v write %v produce %v", c.Net.DialTimeout, c.Net.ReadTimeout,
					c.Net.WriteTimeout, c.Producer.Timeout)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(kafkaYAML(tt.kafka)))
			if err != nil {
				t.Fatal(err)
			}
			t.Run("client", func(t *testing.T) { tt.check(t, cfg.Kafka.saramaConfig("x")) })
			t.Run("producer", func(t *testing.T) {
				c := cfg.Kafka.producerConfig()
				if !c.Producer.Idempotent || c.Producer.RequiredAcks != sarama.WaitForAll {
					t.Fatalf("producer settings lost")
				}
				tt.check(t, c)
			})
		})
	}
}

// TestKafkaClientValidation: bad client settings fail at load with the field's name.
func TestKafkaClientValidation(t *testing.T) {
	cert, key := writePEM(t)
	notPEM := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct{ name, kafka, want string }{
		{"ca without enabled", "  tls: {ca_file: " + cert + "}", "kafka.tls: ca_file"},
		{"insecure without enabled", "  tls: {insecure_skip_verify: true}", "need kafka.tls.enabled"},
		{"ca missing", "  tls: {enabled: true, ca_file: " + missing + "}", "kafka.tls.ca_file"},
		{"ca not pem", "  tls: {enabled: true, ca_file: " + notPEM + "}", "kafka.tls.ca_file: " + notPEM + ": no PEM"},
		{"cert without key", "  tls: {enabled: true, cert_file: " + cert + "}", "kafka.tls.key_file: required"},
		{"key without cert", "  tls: {enabled: true, key_file: " + key + "}", "kafka.tls.cert_file: required"},
		{"cert/key mismatch", "  tls: {enabled: true, cert_file: " + cert + ", key_file: " + notPEM + "}", "kafka.tls.cert_file/key_file"},
		{"unknown tls field", "  tls: {enabled: true, verify: false}", "field verify not found"},
		{"sasl unknown mechanism", "  sasl: {mechanism: GSSAPI, user: u, password: p}", `kafka.sasl.mechanism: "GSSAPI"`},
		{"sasl lower-case", "  sasl: {mechanism: plain, user: u, password: p}", `kafka.sasl.mechanism: "plain"`},
		{"sasl scram lower-case", "  sasl: {mechanism: scram-sha-256, user: u, password: p}", `kafka.sasl.mechanism: "scram-sha-256"`},
		{"sasl scram no password", "  sasl: {mechanism: SCRAM-SHA-512, user: u}", "kafka.sasl.password: required for SCRAM-SHA-512"},
		{"sasl no user", "  sasl: {mechanism: PLAIN, password: p}", "kafka.sasl.user: required"},
		{"sasl no password", "  sasl: {mechanism: PLAIN, user: u}", "kafka.sasl.password: required"},
		{"sasl user without mechanism", "  sasl: {user: u, password: p}", "kafka.sasl.mechanism: required"},
		{"sasl password env unset", "  sasl: {mechanism: PLAIN, user: u, password: \"${TEST_KAFKA_UNSET_PW}\"}", "TEST_KAFKA_UNSET_PW"},
		{"negative timeout", "  timeout: -1s", "kafka.timeout: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(kafkaYAML(tt.kafka)))
			if err == nil {
				t.Fatalf("no error")
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q: want ErrConfig containing %q", err, tt.want)
			}
		})
	}
}
