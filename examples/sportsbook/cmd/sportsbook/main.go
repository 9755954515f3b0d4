// Command sportsbook runs the example service of package sportsbook: an HTTP API over the
// demo views, served from an embedded cacheclient. With -db it also serves the
// read-your-writes endpoints, which write to the demo database.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/collectors"

	// The image holds the binary alone: without a system certificate pool, TLS verifies
	// with these embedded roots.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/examples/sportsbook"
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
	if *showVersion {
		fmt.Println(versionLine())
		return
	}
	if *probeURL != "" {
		os.Exit(probe(*probeURL))
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
	s.Registry().MustRegister(collectors.NewBuildInfoCollector())
	log.Info("sportsbook starting", "version", versionLine(), slog.Group("config", "listen", *listen, "players", *players, "stream", *stream,
		"service", *id, "state_dir", *stateDir, "writes", cfg.DB != nil))
	if err := s.Run(ctx, *listen); err != nil {
		log.Error("stopped", "err", err)
		os.Exit(1)
	}
}

// probe is what -probe does (the image holds no shell and no curl, so the binary is its
// own health check): GET target within 5 s; 0 when it answers 2xx, else 1.
func probe(target string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s: %s", target, resp.Status)
		}
		return nil
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sportsbook: probe:", err)
		return 1
	}
	return 0
}

// versionLine is what -version prints: the module version and the commit the Go
// toolchain recorded in the binary.
func versionLine() string {
	v, commit := "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	return fmt.Sprintf("sportsbook %s (commit %s, %s)", v, commit, runtime.Version())
}
