package distributor

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// TestKafkaTLSAndSASL: the mapped settings really connect. An in-process kfake broker that
// requires mutual TLS (client certificate signed by the test CA) and SASL PLAIN gets the
// start-up snapshot; a wrong password and a missing client certificate make Run fail.
func TestKafkaTLSAndSASL(t *testing.T) {
	pki := testenv.NewPKI(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "statecast", "right"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pki.Server}, ClientCAs: pki.Pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e := newEnv(t)
	e.brokers = c.ListenAddrs()
	e.createItems()
	good := func() Config {
		cfg := e.config(itemsView())
		cfg.Kafka.TLS = kafkaconn.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}
		cfg.Kafka.SASL = kafkaconn.SASL{Mechanism: kafkaconn.SASLPlain, User: "statecast", Password: "right"}
		cfg.Kafka.Timeout = 5 * time.Second
		// A refusal is not retried at start-up; kfake answers a wrong PLAIN password by
		// closing the connection, which is retried (it looks like a broker going away).
		cfg.StartupTimeout = 5 * time.Second
		return cfg
	}

	t.Run("connects", func(t *testing.T) {
		r, reg := startReg(t, good(), testLogger(t))
		r.waitReady(t)
		if n := metricSum(t, reg, "statecast_distributor_rows_published_total", map[string]string{"stream": e.topic}); n != 3 {
			t.Fatalf("rows published over TLS+SASL: %v, want 3", n)
		}
	})
	refused := func(t *testing.T, cfg Config, want string) {
		t.Helper()
		d, err := New(cfg, WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		err = d.Run(ctx)
		t.Logf("Run: %v", err)
		if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Run: %v; want an error containing %q", err, want)
		}
	}
	t.Run("wrong password", func(t *testing.T) {
		cfg := good()
		cfg.Kafka.SASL.Password = "wrong"
		refused(t, cfg, "kafka admin") // the broker closes the connection: "EOF"
	})
	t.Run("no client certificate", func(t *testing.T) {
		cfg := good()
		cfg.Kafka.TLS.CertFile, cfg.Kafka.TLS.KeyFile = "", ""
		refused(t, cfg, "certificate required")
	})
	t.Run("unknown CA", func(t *testing.T) {
		cfg := good()
		cfg.Kafka.TLS.CAFile = testenv.NewPKI(t).CAFile
		refused(t, cfg, "unknown authority")
	})
}

// TestKafkaSCRAM: SASL SCRAM-SHA-256 and SCRAM-SHA-512 (plain TCP) against kfake brokers that
// require them: the snapshot gets through with the right password, Run fails with a wrong one.
func TestKafkaSCRAM(t *testing.T) {
	for _, mech := range []string{kafkaconn.SASLScramSHA256, kafkaconn.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech, "statecast", "right"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			e := newEnv(t)
			e.brokers = c.ListenAddrs()
			e.createItems()
			cfg := e.config(itemsView())
			cfg.Kafka.SASL = kafkaconn.SASL{Mechanism: mech, User: "statecast", Password: "right"}
			cfg.Kafka.Timeout = 5 * time.Second
			r, reg := startReg(t, cfg, testLogger(t))
			r.waitReady(t)
			if n := metricSum(t, reg, "statecast_distributor_rows_published_total", map[string]string{"stream": e.topic}); n != 3 {
				t.Fatalf("rows published over %s: %v, want 3", mech, n)
			}

			bad := e.config(itemsView())
			bad.Kafka.SASL = kafkaconn.SASL{Mechanism: mech, User: "statecast", Password: "wrong"}
			bad.Kafka.Timeout = 5 * time.Second
			bad.StartupTimeout = 5 * time.Second
			d, err := New(bad, WithLogger(testLogger(t)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := d.Run(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Run with a wrong %s password: %v; want a refusal", mech, err)
			}
		})
	}
}
