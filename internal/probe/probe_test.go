package probe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ctx := context.Background()
	if err := Check(ctx, srv.URL+"/healthz", nil); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	if err := Check(ctx, srv.URL+"/readyz", nil); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503 = %v, want an error naming the status", err)
	}
	if err := Check(ctx, "http://127.0.0.1:1/healthz", nil); err == nil {
		t.Fatal("a closed port is healthy")
	}
	if err := Check(ctx, "grpc://127.0.0.1:7070", nil); err == nil {
		t.Fatal("an unknown scheme is healthy")
	}
	down := errors.New("down")
	var got *url.URL
	more := map[string]Func{"grpc": func(_ context.Context, u *url.URL) error { got = u; return down }}
	if err := Check(ctx, "grpc://127.0.0.1:7070/statecast.v1.Player", more); !errors.Is(err, down) || got.Host != "127.0.0.1:7070" {
		t.Fatalf("grpc = %v (url %v)", err, got)
	}
	if code := Run("test", srv.URL+"/healthz", nil); code != 0 {
		t.Fatalf("Run healthy = %d", code)
	}
	if code := Run("test", srv.URL+"/readyz", nil); code != 1 {
		t.Fatalf("Run unhealthy = %d", code)
	}
}
