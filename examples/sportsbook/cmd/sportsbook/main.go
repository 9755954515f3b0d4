// Command sportsbook runs the example service of package sportsbook: an HTTP API over the
// demo views, served from an embedded cacheclient. With -db it also serves the
// read-your-writes endpoints, which write to the demo database.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"
	// The image holds the binary alone: without a system certificate pool, TLS verifies
	// with these embedded roots.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/examples/sportsbook"
	"github.com/statecast/statecast/internal/probe"
	"github.com/statecast/statecast/internal/version"
	"github.com/statecast/statecast/internal/version/versionprom"
)

func main() {
	players := flag.String("players", "127.0.0.1:7070", "comma-separated player addresses")
	stream := flag.String("stream", "sportsbook", "stream to subscribe to")
	id := flag.String("client-id", "sportsbook-example", "service name given to the player (each process gets an instance id of its own)")
	listen := flag.String("listen", "127.0.0.1:8080", "HTTP listen address")
	stateDir := flag.String("state-dir", "", "directory for the cache state file (optional)")
	dsn := flag.String("db", "", "DSN of the demo database, for the write endpoints (optional; without it they answer 501)")
	writeWait := flag.Duration("write-wait", sportsbook.DefaultWriteWait, "how long a write endpoint waits for the cache to show its write")
	showVersion := flag.Bool("version", false, "print the version and exit")
	probeURL := flag.String("probe", "", "check a running service (e.g. http://127.0.0.1:8080/readyz) and exit: 0 healthy, 1 not")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "sportsbook: unexpected argument %q\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	info := version.Get()
	if *showVersion {
		fmt.Println(info.Line("sportsbook"))
		return
	}
	if *probeURL != "" {
		os.Exit(probe.Run("sportsbook", *probeURL, nil))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := sportsbook.Config{
		Client: cacheclient.Config{
			Addresses: strings.Split(*players, ","), Stream: *stream, Service: *id, StateDir: *stateDir,
		},
		WriteWait: *writeWait,
	}
	if *dsn != "" {
		pool, err := pgxpool.New(ctx, *dsn)
		if err != nil {
			log.Error("database", "err", err)
			os.Exit(2)
		}
		defer pool.Close()
		cfg.DB = pool
	}
	s, err := sportsbook.New(cfg, log)
	if err != nil {
		log.Error("config", "err", err)
		os.Exit(2)
	}
	s.Registry().MustRegister(versionprom.Collector(info))
	log.Info("sportsbook starting", append(info.Attrs(), slog.Group("config", "listen", *listen, "players", *players, "stream", *stream,
		"service", *id, "state_dir", *stateDir, "writes", cfg.DB != nil))...)
	if err := s.Run(ctx, *listen); err != nil {
		log.Error("stopped", "err", err)
		os.Exit(1)
	}
}
