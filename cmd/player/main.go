// Command player serves statecast streams to caches over gRPC (see package player).
//
//	player -config player.yaml [-debug]
//
// The file is a player.Config (player.example.yaml shows every field); the library serves
// gRPC on listen (default :7070) and /metrics, /healthz, /status on http_addr (default
// :7071). SIGINT/SIGTERM shut down gracefully.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/statecast/statecast/player"
)

func main() {
	path := flag.String("config", "player.yaml", "YAML configuration file")
	debug := flag.Bool("debug", false, "debug logging")
	flag.Parse()
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := run(*path, log); err != nil {
		log.Error("player failed", "err", err)
		fmt.Fprintln(os.Stderr, "player:", err)
		os.Exit(1)
	}
}

func run(path string, log *slog.Logger) error {
	cfg, err := player.LoadConfig(path)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p, err := player.New(*cfg, player.WithLogger(log), player.WithRegisterer(reg))
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return p.Run(ctx)
}
