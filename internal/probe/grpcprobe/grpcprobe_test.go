package grpcprobe

import (
	"context"
	"net"
	"net/url"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestCheck(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	ctx := context.Background()
	u := &url.URL{Scheme: Scheme, Host: lis.Addr().String()}
	svc := &url.URL{Scheme: Scheme, Host: lis.Addr().String(), Path: "/statecast.v1.Player"}

	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if err := Check(ctx, u); err == nil {
		t.Fatal("NOT_SERVING is healthy")
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	if err := Check(ctx, u); err != nil {
		t.Fatalf("SERVING: %v", err)
	}
	if err := Check(ctx, svc); err == nil {
		t.Fatal("an unknown service is healthy")
	}
	hs.SetServingStatus("statecast.v1.Player", healthpb.HealthCheckResponse_SERVING)
	if err := Check(ctx, svc); err != nil {
		t.Fatalf("service SERVING: %v", err)
	}
	srv.Stop()
	if err := Check(ctx, u); err == nil {
		t.Fatal("a stopped server is healthy")
	}
}
