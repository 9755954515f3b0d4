// Command distributor publishes PostgreSQL views into compacted Kafka topics.
//
//	distributor -config distributor.yaml [-debug]
//
// The file is a distributor.Config (docs/operations.md); the library serves its HTTP
// endpoints on http_addr. SIGINT/SIGTERM shut down gracefully; SIGHUP reconciles every
// view now.
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

	"github.com/statecast/statecast/distributor"
)

func main() {
	path := flag.String("config", "distributor.yaml", "YAML configuration file")
	debug := flag.Bool("debug", false, "debug logging")
	flag.Parse()
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := run(*path, log); err != nil {
		log.Error("distributor failed", "err", err)
		fmt.Fprintln(os.Stderr, "distributor:", err)
		os.Exit(1)
	}
}

func run(path string, log *slog.Logger) error {
	cfg, err := distributor.LoadConfig(path)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d, err := distributor.New(*cfg, distributor.WithLogger(log), distributor.WithRegisterer(reg))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				for _, v := range d.Views() {
					if err := d.Reconcile(ctx, v); err != nil {
						log.Error("SIGHUP reconcile", "view", v, "err", err)
					}
				}
			}
		}
	}()
	return d.Run(ctx)
}
