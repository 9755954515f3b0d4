// Command distributor publishes PostgreSQL views into compacted Kafka topics.
//
//	distributor -config distributor.yaml [-debug]
//	distributor -version
//	distributor -probe http://127.0.0.1:9102/healthz
//
// The file is a distributor.Config (docs/operations.md); the library serves /healthz and
// /metrics on http_addr, /status and POST /reconcile on admin.addr. SIGINT/SIGTERM shut down gracefully; SIGHUP reconciles every
// view now.
package main

import (
	"context"
	"syscall"

	// The images hold the binary alone: without a system certificate pool, TLS to Kafka,
	// PostgreSQL or a player verifies with these embedded roots.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/daemon"
)

func main() { daemon.Main("distributor", run) }

func run(ctx context.Context, env daemon.Env) error {
	cfg, err := distributor.LoadConfig(env.Config)
	if err != nil {
		return err
	}
	d, err := distributor.New(*cfg, distributor.WithLogger(env.Log), distributor.WithRegisterer(env.Reg))
	if err != nil {
		return err
	}
	daemon.OnSignal(ctx, syscall.SIGHUP, func() {
		for _, v := range d.Views() {
			if err := d.Reconcile(ctx, v); err != nil {
				env.Log.Error("SIGHUP reconcile", "view", v, "err", err)
			}
		}
	})
	return d.Run(ctx)
}
