package player

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseConfig: a file gets the daemon's addresses unless it sets them ("" turns one
// off), and every default of Validate.
func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte("insecure: true\nbrokers: [k:9092]\nstreams: [{name: s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Listen: DefaultListen, HTTPAddr: DefaultHTTPAddr, Brokers: []string{"k:9092"},
		Streams: []StreamConfig{{Name: "s", Topic: "s"}}, ClientID: DefaultClientID,
		MaxBatchEntries: DefaultMaxBatchEntries, MaxBatchBytes: DefaultMaxBatchBytes, TargetBudgetBytes: DefaultTargetBudgetBytes,
		AckTimeout: DefaultAckTimeout, ProgressInterval: DefaultProgressInterval, HistoryBytes: DefaultHistoryBytes,
		ShutdownGrace: DefaultShutdownGrace}
	if c.Listen != want.Listen || c.HTTPAddr != want.HTTPAddr || c.ClientID != want.ClientID || c.Streams[0].Name != want.Streams[0].Name || c.Streams[0].Topic != want.Streams[0].Topic ||
		c.MaxBatchEntries != want.MaxBatchEntries || c.MaxBatchBytes != want.MaxBatchBytes || c.TargetBudgetBytes != want.TargetBudgetBytes ||
		c.AckTimeout != want.AckTimeout || c.ProgressInterval != want.ProgressInterval || c.HistoryBytes != want.HistoryBytes ||
		c.ShutdownGrace != want.ShutdownGrace {
		t.Errorf("got  %+v\nwant %+v", *c, want)
	}
	c, err = ParseConfig([]byte("insecure: true\nlisten: 127.0.0.1:9000\nhttp_addr: \"\"\nbrokers: [k:9092]\nstreams: [{name: s, topic: t}]\nack_timeout: 2s\n"))
	if err != nil || c.Listen != "127.0.0.1:9000" || c.HTTPAddr != "" || c.Streams[0].Topic != "t" || c.AckTimeout != 2*time.Second {
		t.Errorf("%+v, %v", c, err)
	}
	// a Config built in Go serves nothing unless it says so
	g := Config{Insecure: true, Brokers: []string{"k"}, Streams: []StreamConfig{{Name: "s"}}}
	if err := g.Validate(); err != nil || g.Listen != "" || g.HTTPAddr != "" || g.Admin.Addr != "" {
		t.Errorf("%+v, %v", g, err)
	}
}

// TestConfigErrors: every problem is reported at once, wrapping ErrConfig, with its field.
func TestConfigErrors(t *testing.T) {
	_, err := ParseConfig([]byte("streams: [{name: a}, {name: a}, {topic: t}]\nmax_batch_bytes: 100\ntarget_budget_bytes: 150\n"))
	for _, want := range []string{"brokers: required", `stream "a": configured twice`, "streams[2].name: required", "target_budget_bytes (150)"} {
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want ErrConfig containing %q", err, want)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"insecure: true\nbrokers: [k]\nstreams: [{name: s}]\nhttp: \":7071\"\n", "line 4: field http not found in type player.Config"},
		{"insecure: true\nbrokers: [k]\nstreams: [{name: s, topik: t}]\n", "line 3: field topik not found in type player.StreamConfig"},
		{"brokers: [\"${TEST_PLAYER_UNSET}\"]\nstreams: [{name: s}]\n", "line 1: brokers[0]: environment variable TEST_PLAYER_UNSET is not set"},
		{"", "empty"},
	} {
		if _, err := ParseConfig([]byte(tc.yaml)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want ErrConfig containing %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := New(Config{}); !errors.Is(err, ErrConfig) {
		t.Errorf("New(empty) = %v", err)
	}
}

// TestNewCopiesConfig: New validates its own copy; the caller's config is never written.
func TestNewCopiesConfig(t *testing.T) {
	cfg := Config{Insecure: true, Brokers: []string{"k"}, Streams: []StreamConfig{{Name: "s"}}}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if cfg.Streams[0].Topic != "" || cfg.ClientID != "" {
		t.Errorf("New wrote the caller's config: %+v", cfg)
	}
}

// TestConfigEnv: ${NAME} is expanded in values after the YAML is parsed: a value with " #"
// is taken whole, and a reference in a comment needs no variable.
func TestConfigEnv(t *testing.T) {
	t.Setenv("TEST_PLAYER_ID", "player #1")
	path := filepath.Join(t.TempDir(), "player.yaml")
	body := "# client_id: ${TEST_PLAYER_COMMENTED_OUT}\ninsecure: true\nbrokers: [k]\nclient_id: ${TEST_PLAYER_ID}\nstreams: [{name: s}]\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil || c.ClientID != "player #1" {
		t.Fatalf("%+v, %v", c, err)
	}
	if _, err := LoadConfig(path + ".missing"); !errors.Is(err, ErrConfig) {
		t.Errorf("missing file: %v", err)
	}
}
