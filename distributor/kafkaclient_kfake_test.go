package distributor

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client certificate.
type testPKI struct {
	caFile, clientCert, clientKey string
	server                        tls.Certificate
	pool                          *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "statecast test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p := &testPKI{caFile: write("ca.pem", "CERTIFICATE", caDER), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	leaf := func(serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	sder, skey := leaf(2, x509.ExtKeyUsageServerAuth)
	p.server = tls.Certificate{Certificate: [][]byte{sder}, PrivateKey: skey}
	cder, ckey := leaf(3, x509.ExtKeyUsageClientAuth)
	kder, _ := x509.MarshalECPrivateKey(ckey)
	p.clientCert = write("client.pem", "CERTIFICATE", cder)
	p.clientKey = write("client.key", "EC PRIVATE KEY", kder)
	return p
}

// TestKafkaTLSAndSASL: the mapped settings really connect. An in-process kfake broker that
// requires mutual TLS (client certificate signed by the test CA) and SASL PLAIN gets the
// start-up snapshot; a wrong password and a missing client certificate make Run fail.
func TestKafkaTLSAndSASL(t *testing.T) {
	pki := newTestPKI(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "statecast", "right"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pki.server}, ClientCAs: pki.pool,
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
		cfg.Kafka.TLS = KafkaTLS{Enabled: true, CAFile: pki.caFile, CertFile: pki.clientCert, KeyFile: pki.clientKey}
		cfg.Kafka.SASL = KafkaSASL{Mechanism: SASLPlain, User: "statecast", Password: "right"}
		cfg.Kafka.Timeout = 5 * time.Second
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
		cfg.Kafka.TLS.CAFile = newTestPKI(t).caFile
		refused(t, cfg, "unknown authority")
	})
}

// TestKafkaSCRAM: SASL SCRAM-SHA-256 and SCRAM-SHA-512 (plain TCP) against kfake brokers that
// require them: the snapshot gets through with the right password, Run fails with a wrong one.
func TestKafkaSCRAM(t *testing.T) {
	for _, mech := range []string{SASLScramSHA256, SASLScramSHA512} {
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
			cfg.Kafka.SASL = KafkaSASL{Mechanism: mech, User: "statecast", Password: "right"}
			cfg.Kafka.Timeout = 5 * time.Second
			r, reg := startReg(t, cfg, testLogger(t))
			r.waitReady(t)
			if n := metricSum(t, reg, "statecast_distributor_rows_published_total", map[string]string{"stream": e.topic}); n != 3 {
				t.Fatalf("rows published over %s: %v, want 3", mech, n)
			}

			bad := e.config(itemsView())
			bad.Kafka.SASL = KafkaSASL{Mechanism: mech, User: "statecast", Password: "wrong"}
			bad.Kafka.Timeout = 5 * time.Second
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
