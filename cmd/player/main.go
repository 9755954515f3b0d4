// Command player serves statecast streams to caches over gRPC (see package player).
//
//	player -config player.yaml [-debug]
//	player -config player.yaml -check      # validate the config, reach Kafka, list the topics
//	player -version
//	player -probe grpc://127.0.0.1:7070   # exit 0 once the gRPC health service is SERVING
//
// The file is a player.Config (player.example.yaml shows every field); the library serves
// gRPC on listen (default :7070; TLS, or insecure: true for plaintext), /metrics,
// /readyz and /livez on http_addr (default :7071), and the status pages on admin.addr (default
// 127.0.0.1:7072). SIGINT/SIGTERM shut down gracefully.
// Exit status: 0 after a graceful stop or a good check, 1 on an error, 2 for a bad command
// line.
package main

import (
	"context"

	// The images hold the binary alone: without a system certificate pool, TLS to Kafka,
	// PostgreSQL or a player verifies with these embedded roots.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/internal/probe/grpcprobe"
	"github.com/statecast/statecast/player"
)

func main() {
	daemon.Main("player", run, daemon.Probe{Scheme: grpcprobe.Scheme, Check: grpcprobe.Check})
}

func run(ctx context.Context, env daemon.Env) error {
	cfg, err := player.LoadConfig(env.Config)
	if err != nil {
		return err
	}
	if !env.Check {
		env.LogStart(cfg.Summary()...)
	}
	p, err := player.New(*cfg, player.WithLogger(env.Log), player.WithRegisterer(env.Reg))
	if err != nil {
		return err
	}
	defer p.Close()
	if env.Check {
		return p.Check(env.Out)
	}
	return p.Run(ctx)
}
