package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestServers: both endpoints serve from ListenServers on, the admin one behind its tokens,
// which are read again while it serves; both stop when ctx ends. A port that cannot be
// taken fails ListenServers and leaves nothing listening.
func TestServers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "ops=tok-1-0123456789abcdef\n")
	admin, err := LoadAdmin(Admin{Addr: "127.0.0.1:0", Tokens: Tokens{File: path}}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	text := func(s string) func() http.Handler {
		return func() http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, s) })
		}
	}
	s, err := ListenServers("127.0.0.1:0", text("public"), admin, text("admin"))
	if err != nil {
		t.Fatal(err)
	}
	attrs := s.Attrs()
	httpAddr, adminAddr := attrs[1].(string), attrs[3].(string)
	if !s.Listening() || attrs[0] != "http" || attrs[2] != "admin" || httpAddr == "" || adminAddr == "" {
		t.Fatalf("Attrs = %v", attrs)
	}
	get := func(addr, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, 10*time.Millisecond, slog.New(slog.DiscardHandler)) }()
	if code, body := get(httpAddr, ""); code != 200 || body != "public" {
		t.Errorf("http: %d %q", code, body)
	}
	if code, _ := get(adminAddr, ""); code != 401 {
		t.Errorf("admin without a token: %d", code)
	}
	if code, body := get(adminAddr, "tok-1-0123456789abcdef"); code != 200 || body != "admin" {
		t.Errorf("admin: %d %q", code, body)
	}
	writeFile(t, path, "ops=tok-2-0123456789abcdef\n")
	waitUntil(t, func() bool { code, _ := get(adminAddr, "tok-2-0123456789abcdef"); return code == 200 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after ctx ended: %v", err)
		}
	case <-time.After(ShutdownGrace + time.Second):
		t.Fatal("Serve did not return")
	}
	for _, addr := range []string{httpAddr, adminAddr} {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			t.Errorf("%s still listening after Serve", addr)
		}
	}

	// The admin address is taken: the public endpoint, already listening, is closed.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy, err := LoadAdmin(Admin{Addr: taken.Addr().String()}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	_ = free.Close()
	if _, err := ListenServers(freeAddr, text("public"), busy, text("admin")); err == nil {
		t.Fatal("a taken admin address was accepted")
	}
	if c, err := net.Dial("tcp", freeAddr); err == nil {
		_ = c.Close()
		t.Errorf("the public endpoint was left listening after the admin one failed")
	}

	// Nothing to serve: no handler is built, and Serve returns at once.
	built := func() http.Handler { t.Error("a handler was built for an endpoint not served"); return nil }
	none, err := ListenServers("", built, nil, built)
	if err != nil || none.Listening() {
		t.Fatalf("no endpoint: %v, listening %v", err, none.Listening())
	}
	if err := none.Serve(context.Background(), time.Second, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("Serve with no endpoint: %v", err)
	}
}

// waitUntil waits up to 10 s for cond, over the real clock (the servers' sockets are real).
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
