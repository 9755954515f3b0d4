package cacheclient

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statecast/statecast/internal/testenv"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// TestIdentity: the Hello carries the service and an instance id of the client's own,
// different for two clients of one service.
func TestIdentity(t *testing.T) {
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error { return s.snapshot(1) })
	a, _ := startClient(t, Config{}, nil, fp)
	b, _ := startClient(t, Config{InstanceID: "fixed-1"}, nil, fp)
	waitReady(t, a)
	waitReady(t, b)
	fp.mu.Lock()
	hellos := append([]*statecastv1.Hello(nil), fp.hellos...)
	fp.mu.Unlock()
	ids := map[string]bool{}
	for _, h := range hellos {
		if h.GetService() != "t" || h.GetClientId() == "" {
			t.Errorf("hello: service %q instance %q", h.GetService(), h.GetClientId())
		}
		ids[h.GetClientId()] = true
	}
	if !ids["fixed-1"] || len(ids) != 2 {
		t.Errorf("instance ids %v: want fixed-1 and a generated one", ids)
	}
	if x, y := DefaultInstanceID(), DefaultInstanceID(); x == y || !strings.Contains(x, "/") {
		t.Errorf("DefaultInstanceID: %q, %q", x, y)
	}
}

// TestTokenSources: a static token and a file read at each call (rotation), sent as a
// bearer token that needs transport security.
func TestTokenSources(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("tok-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := TokenFile(path)
	if tok, err := src(ctx); err != nil || tok != "tok-1" {
		t.Fatalf("TokenFile: %q %v", tok, err)
	}
	if err := os.WriteFile(path, []byte("tok-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	md, err := tokenCredentials{src}.GetRequestMetadata(ctx)
	if err != nil || md["authorization"] != "Bearer tok-2" {
		t.Fatalf("metadata %v %v", md, err)
	}
	if !(tokenCredentials{}).RequireTransportSecurity() {
		t.Fatal("a token may travel in plaintext")
	}
	if _, err := (tokenCredentials{StaticToken("")}).GetRequestMetadata(ctx); err == nil {
		t.Fatal("an empty token was sent")
	}
	if err := os.WriteFile(path, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := src(ctx); err == nil {
		t.Fatal("an empty token file gave a token")
	}
}

// TestTLSFiles: a CA and a client certificate from files; bad files are errors now.
func TestTLSFiles(t *testing.T) {
	pki := testenv.NewPKI(t)
	c, err := TLSFiles(pki.CAFile, pki.ClientCert, pki.ClientKey)
	if err != nil || c.RootCAs == nil || c.GetClientCertificate == nil {
		t.Fatalf("TLSFiles: %+v %v", c, err)
	}
	if cert, err := c.GetClientCertificate(nil); err != nil || len(cert.Certificate) == 0 {
		t.Fatalf("client certificate: %v", err)
	}
	for name, f := range map[string][3]string{
		"missing CA":   {filepath.Join(t.TempDir(), "nope"), "", ""},
		"CA not PEM":   {pki.ClientKey, "", ""},
		"cert alone":   {pki.CAFile, pki.ClientCert, ""},
		"key mismatch": {pki.CAFile, pki.ClientCert, pki.ServerKey},
	} {
		if _, err := TLSFiles(f[0], f[1], f[2]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
