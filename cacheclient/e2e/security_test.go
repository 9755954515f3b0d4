package e2e

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/player"
)

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, b)
}

// writeFile replaces to whole (a rename), as a secret volume does.
func writeFile(t *testing.T, to string, b []byte) {
	t.Helper()
	if err := os.WriteFile(to+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".tmp", to); err != nil {
		t.Fatal(err)
	}
}

// TestSecureClients: cacheclient against real players over TLS, one replica with a
// bearer token read from a file, another of the same service with a client certificate
// (mutual TLS); both stay connected side by side. The players' certificate is rotated
// while they are connected (they keep receiving), then the token too, and a player is
// stopped: both fail over to the other player, on its new certificate, with the new
// token, and resume where they were.
func TestSecureClients(t *testing.T) {
	e := newKafkaEnv(t)
	for i := range 20 {
		e.put("events", [2]string{itoa(i), ev(i, "tennis")})
	}
	pki := testenv.NewPKI(t)
	dir := t.TempDir()
	cert, key, ca, tokens := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tokens")
	copyFile(t, pki.ServerCert, cert)
	copyFile(t, pki.ServerKey, key)
	copyFile(t, pki.CAFile, ca)
	writeFile(t, tokens, []byte("pricing=tok-one-0123456789\n"))
	secure := func(c *player.Config) {
		c.Insecure = false
		c.TLS = player.TLSConfig{CertFile: cert, KeyFile: key, ClientCAFile: ca}
		c.Tokens = player.TokensConfig{File: tokens}
		c.ReloadInterval = 20 * time.Millisecond
		c.Access = []player.Grant{{Principals: []string{"pricing"}, Streams: []string{"s"}, Views: []string{"events"}}}
	}
	pa, addrA, stopA := startPlayerP(t, e, secure)
	_, addrB, _ := startPlayerP(t, e, secure)

	clientTokenFile := filepath.Join(dir, "client-token")
	writeFile(t, clientTokenFile, []byte("tok-one-0123456789\n"))
	caOnly, err := cacheclient.TLSFiles(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ccert, ckey := pki.ClientFiles(t, "pricing")
	mtls, err := cacheclient.TLSFiles(ca, ccert, ckey)
	if err != nil {
		t.Fatal(err)
	}
	start := func(tc *tls.Config, tok cacheclient.TokenSource) *cacheclient.View[event] {
		c, err := cacheclient.New(cacheclient.Config{
			Addresses: []string{addrA, addrB}, Stream: "s", Service: "pricing-svc", TLS: tc, Token: tok,
			BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		v, err := cacheclient.Register(c, "events", decodeEvent)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		waitReady(t, c)
		return v
	}
	withToken := start(caOnly, cacheclient.TokenFile(clientTokenFile))
	withCert := start(mtls, nil)
	want := func() map[string]string {
		e.mu.Lock()
		defer e.mu.Unlock()
		m := map[string]string{}
		for k, v := range e.want["events"] {
			m[k] = v
		}
		return m
	}
	for _, v := range []*cacheclient.View[event]{withToken, withCert} {
		eventually(t, "the snapshot", func() bool { return equalView(v, want()) })
	}
	targets := pa.Status().Streams[0].Targets
	if len(targets) != 2 || targets[0].Service != "pricing-svc" || targets[1].Service != "pricing-svc" || targets[0].ID == targets[1].ID {
		t.Fatalf("two replicas of one service at player A: %+v", targets)
	}

	// The certificate is rotated under the connected clients.
	served := func(addr string) []byte {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.Pool})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Raw
	}
	before := served(addrB)
	newCert, newKey := pki.ServerFiles(t)
	copyFile(t, newKey, key)
	copyFile(t, newCert, cert)
	eventually(t, "player B to serve the new certificate", func() bool { return !bytes.Equal(served(addrB), before) })
	for i := 20; i < 30; i++ {
		e.put("events", [2]string{itoa(i), ev(i, "golf")})
	}
	for _, v := range []*cacheclient.View[event]{withToken, withCert} {
		eventually(t, "the rows after the rotation, on the same connection", func() bool { return equalView(v, want()) })
	}

	// The token is rotated (the old one revoked), then player A goes: both fail over.
	writeFile(t, tokens, []byte("pricing=tok-two-0123456789\n"))
	writeFile(t, clientTokenFile, []byte("tok-two-0123456789\n"))
	stopA()
	for i := 30; i < 40; i++ {
		e.put("events", [2]string{itoa(i), ev(i, "chess")})
	}
	e.put("events", [2]string{"3", ""})
	for _, v := range []*cacheclient.View[event]{withToken, withCert} {
		eventually(t, "the rows through player B", func() bool { return equalView(v, want()) })
	}
}

func itoa(i int) string { return string(rune('a'+i/26)) + string(rune('a'+i%26)) }
