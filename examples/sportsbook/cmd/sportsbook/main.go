// Command sportsbook runs the example service of package sportsbook: an HTTP API over the
// demo views, served from an embedded cacheclient.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/examples/sportsbook"
)

func main() {
	players := flag.String("players", "127.0.0.1:7070", "comma-separated player addresses")
	stream := flag.String("stream", "sportsbook", "stream to subscribe to")
	id := flag.String("client-id", "sportsbook-example", "client id")
	listen := flag.String("listen", "127.0.0.1:8080", "HTTP listen address")
	stateDir := flag.String("state-dir", "", "directory for the cache state file (optional)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := sportsbook.New(cacheclient.Config{
		Addresses: strings.Split(*players, ","), Stream: *stream, ClientID: *id, StateDir: *stateDir,
	}, log)
	if err != nil {
		log.Error("config", "err", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("serving", "listen", *listen, "players", *players)
	if err := s.Run(ctx, *listen); err != nil {
		log.Error("stopped", "err", err)
		os.Exit(1)
	}
}
