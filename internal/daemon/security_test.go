package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/statecast/statecast/internal/testenv"
)

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTokens: entries by name, plain or sha256, from a file and a variable; lookups by
// the token; a reload that revokes one; a bad file that keeps the previous tokens; errors
// that never hold a token.
func TestTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "# clients\npricing = tok-pricing-1\npricing=tok-pricing-2\nrisk="+HashToken("tok-risk")+"\n\n")
	t.Setenv("TEST_TOKENS", "ops=tok-ops,batch=tok-batch")
	s, err := LoadTokens(Tokens{File: path, Env: "TEST_TOKENS"}, "tokens")
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{"tok-pricing-1": "pricing", "tok-pricing-2": "pricing", "tok-risk": "risk", "tok-ops": "ops", "tok-batch": "batch"} {
		if name, ok := s.Lookup(tok); !ok || name != want {
			t.Errorf("Lookup(%q) = %q %v, want %q", tok, name, ok, want)
		}
	}
	for _, tok := range []string{"", "tok-pricing", "tok-pricing-10", HashToken("tok-risk"), "sha256:x"} {
		if name, ok := s.Lookup(tok); ok {
			t.Errorf("Lookup(%q) = %q, want refused", tok, name)
		}
	}
	if changed, err := s.Reload(); changed || err != nil {
		t.Fatalf("Reload of an unchanged file: %v %v", changed, err)
	}
	writeFile(t, path, "pricing=tok-pricing-2\n")
	if changed, err := s.Reload(); !changed || err != nil {
		t.Fatalf("Reload: %v %v", changed, err)
	}
	if _, ok := s.Lookup("tok-pricing-1"); ok {
		t.Error("a token removed from the file is still accepted")
	}
	if _, ok := s.Lookup("tok-ops"); !ok {
		t.Error("the variable's tokens were lost by the reload")
	}
	writeFile(t, path, "pricing=tok-pricing-2\nbroken line secret-in-it\n")
	if changed, err := s.Reload(); changed || err == nil || !strings.Contains(err.Error(), "entry 2: want name=token") || strings.Contains(err.Error(), "secret-in-it") {
		t.Fatalf("Reload of a bad file: %v %v", changed, err)
	}
	if changed, err := s.Reload(); changed || err != nil {
		t.Fatalf("the same bad file is reported once: %v %v", changed, err)
	}
	if _, ok := s.Lookup("tok-pricing-2"); !ok {
		t.Error("a bad file dropped the previous tokens")
	}
	for name, body := range map[string]string{
		"no name":        "=tok-secret",
		"bad name":       "a b=tok-secret",
		"empty token":    "a=",
		"bad hash":       "a=sha256:00",
		"one token, two": "a=tok-secret\nb=tok-secret",
		"empty":          "# nothing\n",
	} {
		writeFile(t, path, body)
		_, err := LoadTokens(Tokens{File: path}, "tokens")
		if err == nil || strings.Contains(err.Error(), "tok-secret") || !strings.HasPrefix(err.Error(), "tokens") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := LoadTokens(Tokens{Env: "TEST_TOKENS_UNSET"}, "admin.tokens"); err == nil || !strings.Contains(err.Error(), "admin.tokens.env: environment variable TEST_TOKENS_UNSET is not set") {
		t.Errorf("unset variable: %v", err)
	}
}

func TestBearerToken(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer": "", "": ""} {
		if got := BearerToken(h); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestTLSFilesReload: a rotated certificate is served to new connections; files caught
// half-written keep the current one.
func TestTLSFilesReload(t *testing.T) {
	pki := testenv.NewPKI(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, to, string(b))
	}
	copyFile(pki.ServerCert, cert)
	copyFile(pki.ServerKey, key)
	f, err := LoadTLS(ServerTLS{CertFile: cert, KeyFile: key}, "tls")
	if err != nil {
		t.Fatal(err)
	}
	first := f.Certificate().Certificate[0]
	ln, err := tls.Listen("tcp", "127.0.0.1:0", f.ServerConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	served := func() []byte {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pki.Pool})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Raw
	}
	if !bytes.Equal(served(), first) {
		t.Fatal("not the loaded certificate")
	}
	c2, k2 := pki.ServerFiles(t)
	copyFile(c2, cert) // the key is not there yet: a half-done rotation
	if changed, err := f.Reload(); changed || err == nil || strings.Contains(err.Error(), "PRIVATE KEY-----") {
		t.Fatalf("half-written rotation: %v %v", changed, err)
	}
	if !bytes.Equal(served(), first) {
		t.Fatal("a half-written rotation replaced the certificate")
	}
	copyFile(k2, key)
	if changed, err := f.Reload(); !changed || err != nil {
		t.Fatalf("Reload: %v %v", changed, err)
	}
	if got := served(); bytes.Equal(got, first) {
		t.Fatal("the rotated certificate is not served")
	}
	for name, cfg := range map[string]ServerTLS{
		"key without cert": {KeyFile: key},
		"cert without key": {CertFile: cert},
		"ca without cert":  {ClientCAFile: pki.CAFile},
		"missing ca":       {CertFile: cert, KeyFile: key, ClientCAFile: filepath.Join(dir, "nope")},
		"ca not pem":       {CertFile: cert, KeyFile: key, ClientCAFile: key},
	} {
		if _, err := LoadTLS(cfg, "tls"); err == nil || !strings.HasPrefix(err.Error(), "tls.") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestWatch: Watch reloads what changed at its next read, and logs a failure once, without
// the content.
func TestWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 10 * time.Millisecond
		path := filepath.Join(t.TempDir(), "tokens")
		writeFile(t, path, "a=tok-one\n")
		s, err := LoadTokens(Tokens{File: path}, "tokens")
		if err != nil {
			t.Fatal(err)
		}
		var logs testenv.LockedBuffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Watch(ctx, interval, slog.New(slog.NewTextHandler(&logs, nil)), s)
		}()
		defer func() { cancel(); <-done }()
		// next lets n intervals pass and waits until Watch has handled the reads they brought.
		next := func(n int) {
			time.Sleep(time.Duration(n) * interval)
			synctest.Wait()
		}
		writeFile(t, path, "a=tok-two\n")
		next(1)
		if _, ok := s.Lookup("tok-two"); !ok {
			t.Fatal("the changed file was not reloaded at the next read")
		}
		if _, ok := s.Lookup("tok-one"); ok {
			t.Error("the replaced token is still accepted")
		}
		if n := strings.Count(logs.String(), "reloaded"); n != 1 {
			t.Errorf("a change logged %d times:\n%s", n, logs.String())
		}
		_ = os.Remove(path)
		next(1)
		if !strings.Contains(logs.String(), "reload failed") {
			t.Fatalf("a missing file was not logged at the next read:\n%s", logs.String())
		}
		next(10)
		if n := strings.Count(logs.String(), "reload failed"); n != 1 {
			t.Errorf("a missing file logged %d times over 11 reads:\n%s", n, logs.String())
		}
		if strings.Contains(logs.String(), "tok-") {
			t.Errorf("a token in the log:\n%s", logs.String())
		}
		if _, ok := s.Lookup("tok-two"); !ok {
			t.Error("a missing file dropped the tokens")
		}
	})
}

// TestAdmin: a non-loopback admin address needs tokens; requests need a valid token when
// tokens are set.
func TestAdmin(t *testing.T) {
	for addr, loop := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, ":1": false, "0.0.0.0:1": false, "10.0.0.1:1": false, "bad": false} {
		if IsLoopback(addr) != loop {
			t.Errorf("IsLoopback(%q) = %v", addr, !loop)
		}
	}
	if err := (Admin{Addr: ":7072"}).Check("admin"); err == nil || !strings.Contains(err.Error(), "admin.addr") {
		t.Errorf("public admin without tokens: %v", err)
	}
	if err := (Admin{Addr: "127.0.0.1:7072"}).Check("admin"); err != nil {
		t.Errorf("loopback admin: %v", err)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "ops=tok-admin\n")
	a, err := LoadAdmin(Admin{Addr: "127.0.0.1:0", Tokens: Tokens{File: path}}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := a.Listen(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "status") }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	for tok, want := range map[string]int{"": 401, "wrong": 401, "tok-admin": 200} {
		req, _ := http.NewRequest("GET", "http://"+hs.Addr().String()+"/status", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want || strings.Contains(string(body), "tok-admin") {
			t.Errorf("token %q: %d %s, want %d", tok, resp.StatusCode, body, want)
		}
	}
}

// TestAdminTLS: admin.tls serves the admin endpoint over HTTPS with the configured
// certificate.
func TestAdminTLS(t *testing.T) {
	pki := testenv.NewPKI(t)
	a, err := LoadAdmin(Admin{Addr: "127.0.0.1:0", TLS: ServerTLS{CertFile: pki.ServerCert, KeyFile: pki.ServerKey}}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Reloadables()) != 1 {
		t.Fatalf("reloadables: %d, want the certificate", len(a.Reloadables()))
	}
	hs, err := a.Listen(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "status") }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + hs.Addr().String() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "status" || resp.TLS == nil {
		t.Fatalf("https: %d %q", resp.StatusCode, body)
	}
	if err := (Admin{Addr: "127.0.0.1:1", TLS: ServerTLS{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: pki.CAFile}}).Check("admin"); err == nil {
		t.Error("a client CA on the admin endpoint was accepted")
	}
}
