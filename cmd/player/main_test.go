package main

import (
	"context"

	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/internal/testenv"

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
	if c.Listen != ":7070" || c.HTTPAddr != ":7071" || c.Admin.Addr != "127.0.0.1:7072" || len(c.Kafka.Brokers) != 1 || c.Kafka.Brokers[0] != "k1:9092" ||
		c.TLS.ClientCAFile == "" || c.Tokens.File == "" || len(c.Access) != 2 || c.Insecure ||
		len(c.Streams) != 1 || c.Streams[0].Name != "sportsbook" || c.AckTimeout != 30*time.Second || c.HistoryBytes != 64<<20 || c.StartupTimeout != 2*time.Minute {
		t.Fatalf("decoded %+v", c)
	}
}

// TestBadConfig: a bad config file makes run fail (main exits 1) before connecting.
func TestBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("kafka: {brokers: [x]}\nstreamz: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), daemon.Env{Config: path, Log: slog.New(slog.DiscardHandler), Reg: prometheus.NewRegistry()}); !errors.Is(err, player.ErrConfig) {
		t.Fatalf("run = %v, want ErrConfig", err)
	}
	if err := run(context.Background(), daemon.Env{Config: filepath.Join(t.TempDir(), "missing.yaml"), Log: slog.New(slog.DiscardHandler), Reg: prometheus.NewRegistry()}); err == nil {
		t.Fatal("missing file accepted")
	}
}

// TestExitStatus runs the binary: a bad command line exits 2, a bad config 1 with its
// error written once, -version 0.
func TestExitStatus(t *testing.T) {
	bin := testenv.BuildCommand(t, "github.com/statecast/statecast/cmd/player")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("kafka: {brokers: [x]}\nstreamz: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		once string
	}{
		{"unknown flag", []string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"stray argument", []string{"-config", bad, "extra"}, 2, `unexpected argument "extra"`},
		{"bad config", []string{"-config", bad}, 1, "field streamz not found"},
		{"bad config, -check", []string{"-config", bad, "-check"}, 1, "field streamz not found"},
		{"version", []string{"-version"}, 0, "player "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := testenv.RunCommand(t, bin, tc.args)
			if code != tc.code || strings.Count(out, tc.once) != 1 {
				t.Errorf("exit %d, want %d; %q %d times, want once:\n%s", code, tc.code, tc.once, strings.Count(out, tc.once), out)
			}
		})
	}
}

// TestCheck: player -check loads the tokens, reaches the real Kafka and finds each
// stream's topic (exit 0), or says which one is missing (exit 1).
func TestCheck(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "check", map[string]string{"cleanup.policy": "compact"})
	bin := testenv.BuildCommand(t, "github.com/statecast/statecast/cmd/player")
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("svc=a-token-of-the-service\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := func(topic string) string {
		path := filepath.Join(dir, topic+".yaml")
		body := fmt.Sprintf("insecure: true\ntokens: {file: %q}\nkafka: {brokers: [%q]}\nstreams: [{name: s, topic: %s}]\n", tokens, brokers[0], topic)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	out, code := testenv.RunCommand(t, bin, []string{"-check", "-config", config(topic)})
	for _, want := range []string{"ok    tokens: 1 client token(s) from " + tokens, "ok    kafka: " + brokers[0] + " answers", "ok    stream s: topic " + topic + ", 1 partition"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("check: exit %d, want 0 and %q:\n%s", code, want, out)
		}
	}
	testenv.NoSecrets(t, "check", out, "a-token-of-the-service")
	absent := testenv.UniqueName("absent")
	out, code = testenv.RunCommand(t, bin, []string{"-check", "-config", config(absent)})
	if code != 1 || !strings.Contains(out, "FAIL  stream s: topic "+absent+" does not exist") {
		t.Errorf("check of an absent topic: exit %d, want 1 and a FAIL line:\n%s", code, out)
	}
}
