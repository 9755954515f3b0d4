// Package grpcprobe checks grpc://host:port[/service] URLs with the standard gRPC health
// service (grpc.health.v1): healthy when the service (default "", the server) is SERVING.
// It is a package of its own so that binaries without gRPC do not link it.
package grpcprobe

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Scheme is the URL scheme Check serves.
const Scheme = "grpc"

// Check asks target's health service; it has the signature of probe.Func.
func Check(ctx context.Context, target *url.URL) error {
	if target.Host == "" {
		return fmt.Errorf("%s: no host:port", target)
	}
	// A probe runs beside the server, over loopback: plaintext, as the kubelet's gRPC
	// probe does.
	cc, err := grpc.NewClient("passthrough:///"+target.Host, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	service := strings.TrimPrefix(target.Path, "/")
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(false))
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s: %s", target, s)
	}
	return nil
}
