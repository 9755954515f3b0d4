// Command player serves statecast streams to caches over gRPC (see package player).
//
//	player -config player.yaml
//
// The YAML file holds player.Config plus listen addresses:
//
//	listen: ":7070"        # gRPC (Player, health, reflection)
//	http: ":7071"          # /metrics, /status (HTML), /status.json
//	brokers: ["localhost:9092"]
//	streams: [{name: orders}]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gopkg.in/yaml.v3"

	"github.com/statecast/statecast/player"
)

type fileConfig struct {
	player.Config `yaml:",inline"`
	Listen        string `yaml:"listen"`
	HTTP          string `yaml:"http"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "player:", err)
		os.Exit(1)
	}
}

// loadConfig reads the YAML file at path (${ENV} expanded, unknown fields rejected).
func loadConfig(path string) (fileConfig, error) {
	fc := fileConfig{Listen: ":7070", HTTP: ":7071"}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fc, err
	}
	dec := yaml.NewDecoder(bytes.NewReader([]byte(os.ExpandEnv(string(raw)))))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		return fc, fmt.Errorf("config %s: %w", path, err)
	}
	return fc, nil
}

func run() error {
	path := flag.String("config", "player.yaml", "YAML config file")
	flag.Parse()
	fc, err := loadConfig(*path)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	p, err := player.New(fc.Config, player.WithLogger(log), player.WithRegisterer(reg))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	lis, err := net.Listen("tcp", fc.Listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/status", p.StatusHandler())
	mux.Handle("/status.json", p.StatusHandler())
	hs := &http.Server{Addr: fc.HTTP, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	}()
	go func() {
		if err := p.Serve(lis); err != nil {
			log.Error("grpc server", "err", err)
		}
	}()
	log.Info("player listening", "grpc", lis.Addr().String(), "http", fc.HTTP)
	runErr := p.Run(ctx)
	log.Info("shutting down", "err", runErr)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	_ = p.Close()
	return runErr
}
