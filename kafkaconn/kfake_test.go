package kafkaconn_test

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

func TestMain(m *testing.M) {
	// sarama's go-metrics meter ticker is process-global and never stops.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// connect opens a sarama client with c (validated first) and reports whether the broker
// accepted it (the client fetches metadata when it is created).
func connect(t *testing.T, c kafkaconn.Config) error {
	t.Helper()
	c.ClientID = "kafkaconn-test"
	c.Timeout = 5 * time.Second
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	sc := c.SaramaConfig()
	sc.Metadata.Retry.Max = 1
	client, err := sarama.NewClient(c.Brokers, sc)
	if err == nil {
		_ = client.Close()
	}
	return err
}

// TestTLSAndSASLConnect: a Config's TLS and SASL PLAIN really connect to a broker that
// requires mutual TLS (client certificate of the test CA) and SASL; a wrong password, a
// missing client certificate and an unknown CA are refused.
func TestTLSAndSASLConnect(t *testing.T) {
	pki := testenv.NewPKI(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(kafkaconn.SASLPlain, "statecast", "right"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pki.Server}, ClientCAs: pki.Pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	good := func() kafkaconn.Config {
		return kafkaconn.Config{Brokers: c.ListenAddrs(),
			TLS:  kafkaconn.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey},
			SASL: kafkaconn.SASL{Mechanism: kafkaconn.SASLPlain, User: "statecast", Password: "right"}}
	}
	if err := connect(t, good()); err != nil {
		t.Fatalf("TLS + SASL PLAIN: %v", err)
	}
	for name, edit := range map[string]func(*kafkaconn.Config){
		"wrong password":        func(c *kafkaconn.Config) { c.SASL.Password = "wrong" },
		"no client certificate": func(c *kafkaconn.Config) { c.TLS.CertFile, c.TLS.KeyFile = "", "" },
		"unknown CA":            func(c *kafkaconn.Config) { c.TLS.CAFile = testenv.NewPKI(t).CAFile },
		"no TLS":                func(c *kafkaconn.Config) { c.TLS = kafkaconn.TLS{} },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := good()
			edit(&cfg)
			if err := connect(t, cfg); err == nil {
				t.Fatal("connected")
			}
		})
	}
}

// TestSCRAMConnect: SCRAM-SHA-256 and SCRAM-SHA-512 (plain TCP) connect with the right
// password and are refused with a wrong one.
func TestSCRAMConnect(t *testing.T) {
	for _, mech := range []string{kafkaconn.SASLScramSHA256, kafkaconn.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech, "statecast", "right"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cfg := kafkaconn.Config{Brokers: c.ListenAddrs(), SASL: kafkaconn.SASL{Mechanism: mech, User: "statecast", Password: "right"}}
			if err := connect(t, cfg); err != nil {
				t.Fatalf("%s: %v", mech, err)
			}
			cfg.SASL.Password = "wrong"
			if err := connect(t, cfg); err == nil {
				t.Fatalf("%s with a wrong password connected", mech)
			}
		})
	}
}
