// Command cachectl-dev runs statecast's demo (make demo; `cachectl dev` runs it): it seeds
// the demo database on a local PostgreSQL, runs the distributor on an in-process Kafka
// broker (or a real one: -kafka env), a player and the sportsbook service, makes scripted
// changes and shows each arrive in the cache.
//
//	cachectl-dev [-for 15s] [-step 1s] [-kafka embedded|env] [-grpc addr] [-http addr] [-status addr] [-snapshot] [-idle] [-v]
//
// It is a command of its own so that cachectl, the operator's tool, does not link the
// in-process broker, the daemons and the example service. Exit status: 0 success, 1 a
// failure, 2 a bad command line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/statecast/statecast/cmd/internal/devenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:])
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "cachectl dev: %v (cachectl dev -h lists the flags)\n", ue.error)
		os.Exit(2)
	case err != nil && !errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "cachectl dev:", err)
		os.Exit(1)
	}
}

// usageError is a bad command line: exit status 2.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ExitOnError)
	dsn := fs.String("pg", os.Getenv("STATECAST_PG_DSN"), "DSN of the local PostgreSQL server (default $STATECAST_PG_DSN)")
	kafka := fs.String("kafka", "embedded", `"embedded" (in-process kfake broker) or "env" ($STATECAST_KAFKA_BROKERS)`)
	dur := fs.Duration("for", 15*time.Second, "how long to keep serving after the scripted changes and the convergence check (0: until interrupted)")
	step := fs.Duration("step", time.Second, "pause between the scripted database changes")
	maxValue := fs.Int("max-value", 160, "cut printed values to this many bytes (0: never)")
	verbose := fs.Bool("v", false, "print the distributor's and the player's logs on stderr")
	idle := fs.Bool("idle", false, "print the idle stream's position records too (one whenever the WAL moves, up to every 100ms)")
	snapshot := fs.Bool("snapshot", false, "print the rows of the start-up epochs too")
	grpcAddr := fs.String("grpc", "127.0.0.1:7070", "where the player serves gRPC (a taken port falls back to a free one)")
	httpAddr := fs.String("http", "127.0.0.1:8080", "where the sportsbook service serves HTTP (a taken port falls back to a free one)")
	statusAddr := fs.String("status", "127.0.0.1:8081", "where the status pages of the distributor, the player and the cache are served (a taken port falls back to a free one)")
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if *dsn == "" {
		return usagef("no PostgreSQL: set STATECAST_PG_DSN (deploy/local/postgres.sh start prints it) or -pg")
	}
	o := devenv.DevOptions{AdminDSN: *dsn, Out: os.Stdout, Duration: *dur, Step: *step, MaxValue: *maxValue,
		ShowIdle: *idle, ShowSnapshot: *snapshot, GRPCAddr: *grpcAddr, HTTPAddr: *httpAddr, StatusAddr: *statusAddr}
	switch *kafka {
	case "embedded":
	case "env":
		b := os.Getenv("STATECAST_KAFKA_BROKERS")
		if b == "" {
			return usagef("-kafka env: STATECAST_KAFKA_BROKERS is empty")
		}
		o.Brokers = strings.Split(b, ",")
	default:
		return usagef("-kafka: %q is neither embedded nor env", *kafka)
	}
	if *verbose {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil)) // distributor and player
	}
	return devenv.Dev(ctx, o)
}
