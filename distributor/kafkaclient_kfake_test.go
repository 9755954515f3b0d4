package distributor

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

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
	t.Cleanup(c.Close) // after the distributor stopped (cleanups run last-in first-out)
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
			t.Cleanup(c.Close) // after the distributor stopped (cleanups run last-in first-out)
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

// TestStopWithKafkaGone: a graceful stop while the broker is gone — in the middle of a
// stream whose polls keep opening transactions — returns within a bound instead of
// waiting for the producer's retries; the producer left behind ends once its retries are
// spent (no goroutine stays for good).
func TestStopWithKafkaGone(t *testing.T) {
	before := goleak.IgnoreCurrent()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.brokers = c.ListenAddrs()
	e.createStock()
	cfg := e.config(stockView())
	cfg.Kafka.Timeout = 2 * time.Second
	r, _ := startReg(t, cfg, testLogger(t))
	r.waitReady(t)
	e.exec(`UPDATE stock SET name = 'moved', version = nextval('ver') WHERE id = 1`)
	c.Close()
	time.Sleep(500 * time.Millisecond) // polls and publications against the gone broker
	start := time.Now()
	r.cancel()
	select {
	case <-r.finished:
		r.stopped = true
	case <-time.After(45 * time.Second):
		t.Fatal("Run did not stop within 45s with the broker gone")
	}
	t.Logf("stopped in %s with the broker gone (Run: %v)", time.Since(start).Round(time.Millisecond), r.err)
	// With Kafka gone for good, the producer left behind ends when its retries are spent
	// (about 2 minutes: sarama's transaction retries, each through a metadata refresh).
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		err := goleak.Find(before, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the producer left behind still runs 3 minutes after the stop: %v", err)
		}
	}
	t.Logf("the producer left behind ended %s after the stop", time.Since(start).Round(time.Millisecond))
}
