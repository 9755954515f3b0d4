package main

import (
	"context"

	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/statecast/statecast/internal/daemon"

	"go.uber.org/goleak"

	"github.com/statecast/statecast/distributor"
)

// sarama (testenv's admin) starts one process-wide metrics goroutine that never ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// TestBadConfig: a bad config file makes run fail (main exits 1) before connecting.
func TestBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.yaml")
	if err := os.WriteFile(path, []byte("postgres: {dsn: x}\nkafka: {brokers: [b]}\nstreams: []\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), daemon.Env{Config: path, Log: slog.New(slog.DiscardHandler), Reg: prometheus.NewRegistry()})
	if !errors.Is(err, distributor.ErrConfig) {
		t.Fatalf("run = %v, want ErrConfig", err)
	}
	if err := run(context.Background(), daemon.Env{Config: filepath.Join(t.TempDir(), "missing.yaml"), Log: slog.New(slog.DiscardHandler), Reg: prometheus.NewRegistry()}); err == nil {
		t.Fatal("missing file accepted")
	}
}
