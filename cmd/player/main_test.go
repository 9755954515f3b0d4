package main

import (
	"context"

	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/statecast/statecast/internal/daemon"

	"go.uber.org/goleak"

	"github.com/statecast/statecast/player"
)

// sarama (the topics of TestSecretsNeverLogged) starts one process-wide metrics goroutine
// that never ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// TestExampleConfig: player.example.yaml loads, with ${ENV} expanded and the daemon's
// addresses.
func TestExampleConfig(t *testing.T) {
	t.Setenv("STATECAST_KAFKA_BROKERS", "k1:9092")
	c, err := player.LoadConfig("player.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":7070" || c.HTTPAddr != ":7071" || c.Admin.Addr != "127.0.0.1:7072" || len(c.Brokers) != 1 || c.Brokers[0] != "k1:9092" ||
		c.TLS.ClientCAFile == "" || c.Tokens.File == "" || len(c.Access) != 2 || c.Insecure ||
		len(c.Streams) != 1 || c.Streams[0].Name != "sportsbook" || c.AckTimeout != 30*time.Second || c.HistoryBytes != 64<<20 {
		t.Fatalf("decoded %+v", c)
	}
}

// TestBadConfig: a bad config file makes run fail (main exits 1) before connecting.
func TestBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("brokers: [x]\nstreamz: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), daemon.Env{Config: path, Log: slog.New(slog.DiscardHandler), Reg: prometheus.NewRegistry()}); !errors.Is(err, player.ErrConfig) {
		t.Fatalf("run = %v, want ErrConfig", err)
	}
	if err := run(context.Background(), daemon.Env{Config: filepath.Join(t.TempDir(), "missing.yaml"), Log: slog.New(slog.DiscardHandler), Reg: prometheus.NewRegistry()}); err == nil {
		t.Fatal("missing file accepted")
	}
}
