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
	writeFile(t, path, "# clients\npricing = tok-pricing-long-1\npricing=tok-pricing-long-2\nrisk="+HashToken("tok-risk-0123456789")+"\n\n")
	t.Setenv("TEST_TOKENS", "ops=tok-ops-0123456789,batch=tok-batch-0123456789")
	s, err := LoadTokens(Tokens{File: path, Env: "TEST_TOKENS"}, "tokens")
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{"tok-pricing-long-1": "pricing", "tok-pricing-long-2": "pricing", "tok-risk-0123456789": "risk", "tok-ops-0123456789": "ops", "tok-batch-0123456789": "batch"} {
		if name, ok := s.Lookup(tok); !ok || name != want {
			t.Errorf("Lookup(%q) = %q %v, want %q", tok, name, ok, want)
		}
	}
	for _, tok := range []string{"", "tok-pricing-long", "tok-pricing-long-10", HashToken("tok-risk-0123456789"), "sha256:x"} {
		if name, ok := s.Lookup(tok); ok {
			t.Errorf("Lookup(%q) = %q, want refused", tok, name)
		}
	}
	if changed, err := s.Reload(); changed || err != nil {
		t.Fatalf("Reload of an unchanged file: %v %v", changed, err)
	}
	writeFile(t, path, "pricing=tok-pricing-long-2\n")
	if changed, err := s.Reload(); !changed || err != nil {
		t.Fatalf("Reload: %v %v", changed, err)
	}
	if _, ok := s.Lookup("tok-pricing-long-1"); ok {
		t.Error("a token removed from the file is still accepted")
	}
	if _, ok := s.Lookup("tok-ops-0123456789"); !ok {
		t.Error("the variable's tokens were lost by the reload")
	}
	writeFile(t, path, "pricing=tok-pricing-long-2\nbroken line secret-in-it\n")
	if changed, err := s.Reload(); changed || err == nil || !strings.Contains(err.Error(), "entry 2: want name=token") || strings.Contains(err.Error(), "secret-in-it") {
		t.Fatalf("Reload of a bad file: %v %v", changed, err)
	}
	if changed, err := s.Reload(); changed || err != nil {
		t.Fatalf("the same bad file is reported once: %v %v", changed, err)
	}
	if _, ok := s.Lookup("tok-pricing-long-2"); !ok {
		t.Error("a bad file dropped the previous tokens")
	}
	for name, body := range map[string]string{
		"no name":        "=tok-secret-0123456789",
		"bad name":       "a b=tok-secret-0123456789",
		"empty token":    "a=",
		"bad hash":       "a=sha256:00",
		"one token, two": "a=tok-secret-0123456789\nb=tok-secret-0123456789",
		"empty":          "# nothing\n",
		"short token":    "a=tok-secret-15",
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

// TestTokensFailClosed: whatever the reload finds — an emptied file, one holding only
// comments, a deleted one, one with a malformed line — a token removed from it is refused
// from then on; a malformed file adds nothing and keeps only the tokens still listed on its
// well-formed lines, and says so (Err) until a good file replaces it. The variable's tokens
// stay (it is read only at start).
func TestTokensFailClosed(t *testing.T) {
	const a, b, c = "tok-a-0123456789abcdef", "tok-b-0123456789abcdef", "tok-c-0123456789abcdef"
	path := filepath.Join(t.TempDir(), "tokens")
	good := "alice=" + a + "\nbob=" + b + "\n"
	writeFile(t, path, good)
	t.Setenv("TEST_TOKENS_FC", "ops=tok-ops-0123456789")
	s, err := LoadTokens(Tokens{File: path, Env: "TEST_TOKENS_FC"}, "tokens")
	if err != nil {
		t.Fatal(err)
	}
	accepted := func(tok string) bool { _, ok := s.Lookup(tok); return ok }
	restore := func() {
		t.Helper()
		writeFile(t, path, good)
		if _, err := s.Reload(); err != nil {
			t.Fatal(err)
		}
		if !accepted(a) || !accepted(b) || s.Err() != nil {
			t.Fatalf("the good file again: a %v b %v err %v", accepted(a), accepted(b), s.Err())
		}
	}
	for name, body := range map[string]string{"emptied": "", "comments only": "# every token revoked\n\n"} {
		writeFile(t, path, body)
		if changed, err := s.Reload(); !changed || err != nil {
			t.Errorf("%s: Reload %v %v, want a change", name, changed, err)
		}
		if accepted(a) || accepted(b) {
			t.Errorf("%s: a token of the file is still accepted", name)
		}
		if !accepted("tok-ops-0123456789") {
			t.Errorf("%s: the variable's token was dropped", name)
		}
		restore()
	}
	// Without the variable, an emptied file leaves no token at all: every one is refused.
	alone, err := LoadTokens(Tokens{File: path}, "tokens")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "")
	if changed, err := alone.Reload(); !changed || err != nil || alone.Len() != 0 {
		t.Errorf("emptied, no variable: Reload %v %v, %d tokens left", changed, err, alone.Len())
	}
	if _, ok := alone.Lookup(a); ok {
		t.Error("emptied, no variable: the token is still accepted")
	}
	restore()

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.Reload(); !changed || err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("deleted: Reload %v %v, want a change and an error saying the tokens are revoked", changed, err)
	}
	if accepted(a) || accepted(b) || s.Err() == nil {
		t.Errorf("deleted: a %v b %v err %v", accepted(a), accepted(b), s.Err())
	}
	restore()

	// bob's line is removed, carol's added, and a line is malformed: alice stays, bob is
	// revoked, carol waits for a file that loads.
	writeFile(t, path, "alice="+a+"\ncarol="+c+"\nthis line holds "+b+"\n")
	changed, err := s.Reload()
	if !changed || err == nil || !strings.Contains(err.Error(), "entry 3") || strings.Contains(err.Error(), b) {
		t.Fatalf("malformed: Reload %v %v", changed, err)
	}
	if !accepted(a) || accepted(b) || accepted(c) {
		t.Errorf("malformed: alice %v (want true), bob %v, carol %v (want false)", accepted(a), accepted(b), accepted(c))
	}
	if s.Err() == nil || strings.Contains(s.Err().Error(), b) {
		t.Errorf("malformed: Err %v", s.Err())
	}
	if changed, err := s.Reload(); changed || err != nil {
		t.Errorf("the same malformed file again: %v %v, want it reported once", changed, err)
	}
	if s.Err() == nil {
		t.Error("the malformed file is forgotten at the next read")
	}
	// A line whose name changed keeps no token: the name is the principal.
	writeFile(t, path, "mallory="+a+"\nbob\n")
	if _, err := s.Reload(); err == nil || accepted(a) || accepted(b) {
		t.Errorf("a token moved to another name: err %v, a %v, b %v", err, accepted(a), accepted(b))
	}
	restore()
	writeFile(t, path, "alice="+a+"\nbob=short\n")
	if _, err := s.Reload(); err == nil || !strings.Contains(err.Error(), "at least 16") || accepted(b) || !accepted(a) {
		t.Errorf("a short token: err %v, a %v, b %v", err, accepted(a), accepted(b))
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
// the content; a deleted file revokes its tokens.
func TestWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 10 * time.Millisecond
		path := filepath.Join(t.TempDir(), "tokens")
		writeFile(t, path, "a=tok-one-0123456789\n")
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
		writeFile(t, path, "a=tok-two-0123456789\n")
		next(1)
		if _, ok := s.Lookup("tok-two-0123456789"); !ok {
			t.Fatal("the changed file was not reloaded at the next read")
		}
		if _, ok := s.Lookup("tok-one-0123456789"); ok {
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
		if _, ok := s.Lookup("tok-two-0123456789"); ok {
			t.Error("a token of a deleted file is still accepted")
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
	writeFile(t, path, "ops=tok-admin-0123456789\n")
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
	for tok, want := range map[string]int{"": 401, "wrong": 401, "tok-admin-0123456789": 200} {
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
		if resp.StatusCode != want || strings.Contains(string(body), "tok-admin-0123456789") {
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

// TestAdminPlaintextTokens: tokens over plaintext HTTP are refused on an address beyond
// this host (they would cross the network in the clear); over TLS, or on loopback, they
// are accepted.
func TestAdminPlaintextTokens(t *testing.T) {
	tok := Tokens{File: "/nonexistent/tokens"}
	if err := (Admin{Addr: ":7072", Tokens: tok}).Check("admin"); err == nil || !strings.Contains(err.Error(), "admin.tls") {
		t.Errorf("tokens over plaintext on a public address: %v, want an error naming admin.tls", err)
	}
	if err := (Admin{Addr: "10.0.0.1:7072", Tokens: tok, TLS: ServerTLS{CertFile: "c", KeyFile: "k"}}).Check("admin"); err != nil {
		t.Errorf("tokens over TLS: %v", err)
	}
	if err := (Admin{Addr: "127.0.0.1:7072", Tokens: tok}).Check("admin"); err != nil {
		t.Errorf("tokens over loopback: %v", err)
	}
	// A trusted network says so, and is warned of at start.
	if err := (Admin{Addr: ":7072", Tokens: tok, Insecure: true}).Check("admin"); err != nil {
		t.Errorf("tokens over plaintext with admin.insecure: %v", err)
	}
	if err := (Admin{Addr: ":7072", Tokens: tok, Insecure: true, TLS: ServerTLS{CertFile: "c", KeyFile: "k"}}).Check("admin"); err == nil || !strings.Contains(err.Error(), "admin.insecure") {
		t.Errorf("admin.insecure with admin.tls: %v, want an error naming admin.insecure", err)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "ops=tok-admin-0123456789\n")
	var logs bytes.Buffer
	if _, err := LoadAdmin(Admin{Addr: ":7072", Tokens: Tokens{File: path}, Insecure: true}, "admin", WithAdminLogger(slog.New(slog.NewTextHandler(&logs, nil)))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "plaintext") || !strings.Contains(logs.String(), "admin.insecure") {
		t.Errorf("admin.insecure is not warned of:\n%s", logs.String())
	}
}

// TestAdminCrossOrigin: a page in a browser cannot drive the admin endpoint: a state
// change from another origin (a form's POST, a fetch), or any request whose Host is not
// the loopback address it listens on (DNS rebinding), is refused — with or without
// tokens; curl's and cachectl's requests pass.
func TestAdminCrossOrigin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "ops=tok-admin-0123456789\n")
	for _, tokens := range []Tokens{{}, {File: path}} {
		a, err := LoadAdmin(Admin{Addr: "127.0.0.1:0", Tokens: tokens}, "admin")
		if err != nil {
			t.Fatal(err)
		}
		acted := 0
		mux := http.NewServeMux()
		mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "status") })
		mux.HandleFunc("POST /reconcile", func(w http.ResponseWriter, r *http.Request) { acted++ })
		hs, err := a.Listen(mux)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- hs.Serve(ctx) }()
		base := "http://" + hs.Addr().String()
		do := func(method, path string, header map[string]string, host string) int {
			req, _ := http.NewRequest(method, base+path, nil)
			if tokens.Enabled() {
				req.Header.Set("Authorization", "Bearer tok-admin-0123456789")
			}
			for k, v := range header {
				req.Header.Set(k, v)
			}
			if host != "" {
				req.Host = host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		for name, c := range map[string]struct {
			method, path string
			header       map[string]string
			host         string
			want         int
		}{
			"curl's POST":               {"POST", "/reconcile", nil, "", 200},
			"curl's POST to localhost":  {"POST", "/reconcile", nil, "localhost:" + strings.Split(hs.Addr().String(), ":")[1], 200},
			"a form of another origin":  {"POST", "/reconcile", map[string]string{"Origin": "https://evil.example"}, "", 403},
			"a fetch of another site":   {"POST", "/reconcile", map[string]string{"Sec-Fetch-Site": "cross-site"}, "", 403},
			"a POST by a rebound name":  {"POST", "/reconcile", nil, "evil.example:80", 403},
			"a GET by a rebound name":   {"GET", "/status", nil, "evil.example", 403},
			"a GET of another origin":   {"GET", "/status", map[string]string{"Origin": "https://evil.example"}, "", 200},
			"a POST of the same origin": {"POST", "/reconcile", map[string]string{"Sec-Fetch-Site": "same-origin"}, "", 200},
		} {
			if got := do(c.method, c.path, c.header, c.host); got != c.want {
				t.Errorf("tokens %v: %s: %d, want %d", tokens.Enabled(), name, got, c.want)
			}
		}
		if acted != 3 {
			t.Errorf("tokens %v: %d actions ran, want 3", tokens.Enabled(), acted)
		}
		cancel()
		<-done
	}
}

// TestAdminFailedLogins: a request refused for its token is counted (AuthFailures), logged
// without the token (a line a second at most), and its connection closed; one with a wrong
// token is answered after the failure delay, one without a token at once; a good token is
// neither delayed nor closed.
func TestAdminFailedLogins(t *testing.T) {
	defer func(d time.Duration) { adminFailureDelay = d }(adminFailureDelay)
	adminFailureDelay = 300 * time.Millisecond
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "ops=tok-admin-0123456789\n")
	var logs testenv.LockedBuffer
	a, err := LoadAdmin(Admin{Addr: "127.0.0.1:0", Tokens: Tokens{File: path}}, "admin", WithAdminLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
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
	get := func(tok string) (code int, closed bool, took time.Duration) {
		req, _ := http.NewRequest("GET", "http://"+hs.Addr().String()+"/status", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Close, time.Since(start)
	}
	if code, closed, took := get("tok-guess-0123456789"); code != 401 || !closed || took < adminFailureDelay {
		t.Errorf("a wrong token: %d, closed %v, after %s; want 401, closed, after %s", code, closed, took, adminFailureDelay)
	}
	if code, closed, took := get(""); code != 401 || !closed || took >= adminFailureDelay {
		t.Errorf("no token: %d, closed %v, after %s; want 401, closed, at once", code, closed, took)
	}
	if code, closed, took := get("tok-admin-0123456789"); code != 200 || closed || took >= adminFailureDelay {
		t.Errorf("the good token: %d, closed %v, after %s; want 200, kept, at once", code, closed, took)
	}
	if n := a.AuthFailures(); n != 2 {
		t.Errorf("AuthFailures = %d, want 2", n)
	}
	if n := strings.Count(logs.String(), "admin authentication failed"); n != 1 || !strings.Contains(logs.String(), `"reason":"bad_token"`) {
		t.Errorf("want one log line (the second within the same second held back), got %d:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "tok-") {
		t.Errorf("a token in the log:\n%s", logs.String())
	}
}
