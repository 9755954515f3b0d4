// Command distributor publishes PostgreSQL views into compacted Kafka topics.
//
//	distributor -config distributor.yaml [-debug]
//	distributor -config distributor.yaml -check   # the config against PostgreSQL and Kafka
//	distributor -version
//	distributor -probe http://127.0.0.1:9102/readyz
//
// The file is a distributor.Config (docs/operations.md); the library serves /livez,
// /readyz, /healthz and /metrics on http_addr, /status and POST /reconcile on admin.addr.
// SIGINT/SIGTERM shut down gracefully; SIGHUP reconciles every view now. Exit status: 0
// after a graceful stop, 1 on an error, 2 for a bad command line.
package main

import (
	"context"
	"errors"
	"fmt"
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
	if env.Check {
		return check(ctx, env, cfg)
	}
	env.LogStart(cfg.Summary()...)
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

// check is -check: the config against PostgreSQL (each view's SQL, keys, types, the
// capture prerequisites) and Kafka (the topics), printed on env.Out.
func check(ctx context.Context, env daemon.Env, cfg *distributor.Config) error {
	fmt.Fprintf(env.Out, "%s: the config is valid\n", env.Config)
	db, err := distributor.CheckDatabase(ctx, *cfg)
	if err != nil {
		fmt.Fprintf(env.Out, "postgres: FAIL %v\n", err)
	} else {
		db.Print(env.Out)
		if !db.OK() {
			err = errors.New("distributor: the database does not meet the config (FAIL lines)")
		}
	}
	return errors.Join(err, distributor.CheckKafka(*cfg, env.Out))
}
