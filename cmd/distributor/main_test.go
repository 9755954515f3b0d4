package main

import (
	"context"

	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/internal/testenv"

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

// TestExitStatus runs the binary: a bad command line exits 2, a bad config 1 with its
// error written once, -version 0.
func TestExitStatus(t *testing.T) {
	bin := testenv.BuildCommand(t, "github.com/statecast/statecast/cmd/distributor")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("postgres: {dsn: x}\nkafka: {brokers: [b]}\nstreams: []\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		once string // written exactly once
	}{
		{"unknown flag", []string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"stray argument", []string{"-config", bad, "extra"}, 2, `unexpected argument "extra"`},
		{"bad config", []string{"-config", bad}, 1, "field bogus not found"},
		{"missing config", []string{"-config", filepath.Join(t.TempDir(), "none.yaml")}, 1, "none.yaml"},
		{"version", []string{"-version"}, 0, "distributor "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := testenv.RunCommand(t, bin, tc.args)
			if code != tc.code || strings.Count(out, tc.once) != 1 {
				t.Errorf("exit %d, want %d; %q %d times, want once:\n%s", code, tc.code, tc.once, strings.Count(out, tc.once), out)
			}
			if strings.Contains(out, "distributor: distributor:") {
				t.Errorf("the program's name twice:\n%s", out)
			}
		})
	}
}
