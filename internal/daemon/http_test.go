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
