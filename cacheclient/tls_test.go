package cacheclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// TestTLS: with Config.TLS the client talks TLS to the player (self-signed certificate
// trusted through RootCAs).
func TestTLS(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "player"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fp := &fakePlayer{addr: lis.Addr().String(), change: make(chan struct{}), script: func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		return s.snapshot(3, ent(1, "1", evJSON(1, "a")))
	}}
	fp.srv = grpc.NewServer(grpc.Creds(credentials.NewServerTLSFromCert(&tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key})))
	statecastv1.RegisterPlayerServer(fp.srv, fp)
	done := make(chan struct{})
	go func() { defer close(done); fp.srv.Serve(lis) }()
	t.Cleanup(func() { fp.srv.Stop(); <-done })

	c, v := startClient(t, Config{TLS: &tls.Config{RootCAs: pool}}, nil, fp)
	waitReady(t, c)
	if v.Len() != 1 {
		t.Fatalf("len %d", v.Len())
	}
}
