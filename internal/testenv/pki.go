package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// PKI is a test CA with a server certificate for 127.0.0.1 and a client certificate, the
// PEM files written to a temporary directory removed when the test ends. It issues more
// certificates on demand (ServerFiles for a rotation, ClientFiles for named clients).
type PKI struct {
	CAFile, ClientCert, ClientKey string          // PEM files
	ServerCert, ServerKey         string          // PEM files of Server
	Server                        tls.Certificate // for 127.0.0.1
	Pool                          *x509.CertPool  // holds the CA

	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	serial atomic.Int64
}

// NewPKI creates a PKI valid for one hour.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{dir: t.TempDir(), Pool: x509.NewCertPool()}
	p.serial.Store(1)
	p.caKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "statecast test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(caDER)
	p.CAFile = p.write(t, "ca.pem", "CERTIFICATE", caDER)
	p.Pool.AddCert(p.ca)
	p.ServerCert, p.ServerKey = p.issue(t, serverTemplate(), "server.pem", "server.key")
	var errLoad error
	if p.Server, errLoad = tls.LoadX509KeyPair(p.ServerCert, p.ServerKey); errLoad != nil {
		t.Fatal(errLoad)
	}
	// Fixed names: docs' examples name /etc/…/ca.pem, client.pem and client.key, and tests
	// replace the directory.
	p.ClientCert, p.ClientKey = p.issue(t, clientTemplate(t, "leaf"), "client.pem", "client.key")
	return p
}

func (p *PKI) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue signs a leaf certificate with the CA and writes it and its key to new files
// (named after its serial unless names are given: the certificate's, then the key's).
func (p *PKI) issue(t testing.TB, tmpl *x509.Certificate, names ...string) (certFile, keyFile string) {
	t.Helper()
	n := p.serial.Add(1)
	if len(names) != 2 {
		names = []string{fmt.Sprintf("cert-%d.pem", n), fmt.Sprintf("key-%d.pem", n)}
	}
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl.SerialNumber = big.NewInt(n)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &k.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, names[0], "CERTIFICATE", der), p.write(t, names[1], "EC PRIVATE KEY", kder)
}

// ServerFiles issues a new server certificate for 127.0.0.1 and localhost (another
// serial and key each call: a rotation) and returns its PEM files.
func (p *PKI) ServerFiles(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	return p.issue(t, serverTemplate())
}

func serverTemplate() *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: "statecast test server"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
}

// ClientFiles issues a client certificate whose subject CN is cn (and URI SANs uris, when
// given) and returns its PEM files.
func (p *PKI) ClientFiles(t testing.TB, cn string, uris ...string) (certFile, keyFile string) {
	t.Helper()
	return p.issue(t, clientTemplate(t, cn, uris...))
}

func clientTemplate(t testing.TB, cn string, uris ...string) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	return tmpl
}

// ClientCertificate is ClientFiles loaded as a tls.Certificate.
func (p *PKI) ClientCertificate(t testing.TB, cn string, uris ...string) tls.Certificate {
	t.Helper()
	c, k := p.ClientFiles(t, cn, uris...)
	cert, err := tls.LoadX509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// PKCS8 writes keyFile's key again as a PKCS #8 "PRIVATE KEY" PEM file (what a Java
// client's netty reads; Go reads both) and returns its path.
func (p *PKI) PKCS8(t testing.TB, keyFile string) string {
	t.Helper()
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM block", keyFile)
	}
	k, err := x509.ParseECPrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, filepath.Base(keyFile)+".pkcs8", "PRIVATE KEY", der)
}
