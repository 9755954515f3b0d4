package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestHTTPServer(t *testing.T) {
	s, err := ListenHTTP("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ListenHTTP(s.Addr().String(), http.NotFoundHandler()); err == nil {
		t.Fatal("a taken port was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	resp, err := http.Get("http://" + s.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "hello" {
		t.Fatalf("body %q", body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after shutdown = %v", err)
		}
	case <-time.After(ShutdownGrace + time.Second):
		t.Fatal("Serve did not return")
	}
	if c, err := net.Dial("tcp", s.Addr().String()); err == nil {
		_ = c.Close()
		t.Fatal("still listening after shutdown")
	}
}

// TestHTTPTimeouts: a keep-alive connection left idle, and one that sends a request too
// slowly, are closed; a POST (an action such as a reconcile) may answer later than a GET
// must.
func TestHTTPTimeouts(t *testing.T) {
	defer func(t timeouts) { httpTimeouts = t }(httpTimeouts)
	httpTimeouts = timeouts{ReadHeader: 300 * time.Millisecond, Read: 300 * time.Millisecond, Write: 300 * time.Millisecond, Idle: 300 * time.Millisecond}
	s, err := ListenHTTP("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			time.Sleep(600 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "hello")
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	defer func() { cancel(); <-done }()

	closedWithin := func(c net.Conn, d time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(d))
		_, err := io.Copy(io.Discard, c)
		ne, ok := err.(net.Error)
		return !(ok && ne.Timeout())
	}
	idle, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(idle, 3*time.Second) {
		t.Error("a keep-alive connection stays open past the idle timeout")
	}
	slow, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	_, _ = io.WriteString(slow, "GET / HTTP/1.1\r\n")
	if !closedWithin(slow, 3*time.Second) {
		t.Error("a request that never ends stays open")
	}
	resp, err := http.Post("http://"+s.Addr().String()+"/", "text/plain", nil)
	if err != nil {
		t.Fatalf("a POST answered after the write timeout: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "hello" {
		t.Errorf("a POST answered after the write timeout: %q", body)
	}
}
