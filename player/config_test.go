package player

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// TestParseConfig: a file gets the daemon's addresses unless it sets them ("" turns one
// off), and every default of Validate.
func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte("insecure: true\nkafka: {brokers: [k:9092]}\nstreams: [{name: s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Listen: DefaultListen, HTTPAddr: DefaultHTTPAddr, Kafka: kafkaconn.Config{Brokers: []string{"k:9092"}},
		Streams:         []StreamConfig{{Name: "s", Topic: "s"}},
		MaxBatchEntries: DefaultMaxBatchEntries, MaxBatchBytes: DefaultMaxBatchBytes, TargetBudgetBytes: DefaultTargetBudgetBytes,
		AckTimeout: DefaultAckTimeout, ProgressInterval: DefaultProgressInterval, HistoryBytes: DefaultHistoryBytes,
		ShutdownGrace: DefaultShutdownGrace}
	if c.Listen != want.Listen || c.HTTPAddr != want.HTTPAddr || c.Kafka.ClientID != DefaultClientID || c.Streams[0].Name != want.Streams[0].Name || c.Streams[0].Topic != want.Streams[0].Topic ||
		c.MaxBatchEntries != want.MaxBatchEntries || c.MaxBatchBytes != want.MaxBatchBytes || c.TargetBudgetBytes != want.TargetBudgetBytes ||
		c.AckTimeout != want.AckTimeout || c.ProgressInterval != want.ProgressInterval || c.HistoryBytes != want.HistoryBytes ||
		c.ShutdownGrace != want.ShutdownGrace {
		t.Errorf("got  %+v\nwant %+v", *c, want)
	}
	c, err = ParseConfig([]byte("insecure: true\nlisten: 127.0.0.1:9000\nhttp_addr: \"\"\nkafka: {brokers: [k:9092]}\nstreams: [{name: s, topic: t}]\nack_timeout: 2s\n"))
	if err != nil || c.Listen != "127.0.0.1:9000" || c.HTTPAddr != "" || c.Streams[0].Topic != "t" || c.AckTimeout != 2*time.Second {
		t.Errorf("%+v, %v", c, err)
	}
	// a Config built in Go serves nothing unless it says so
	g := Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"k"}}, Streams: []StreamConfig{{Name: "s"}}}
	if err := g.Validate(); err != nil || g.Listen != "" || g.HTTPAddr != "" || g.Admin.Addr != "" {
		t.Errorf("%+v, %v", g, err)
	}
}

// TestConfigErrors: every problem is reported at once, wrapping ErrConfig, with its field.
func TestConfigErrors(t *testing.T) {
	_, err := ParseConfig([]byte("streams: [{name: a}, {name: a}, {topic: t}]\nmax_batch_bytes: 100\ntarget_budget_bytes: 150\n"))
	for _, want := range []string{"kafka.brokers: required", `stream "a": configured twice`, "streams[2].name: required", "target_budget_bytes (150)"} {
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want ErrConfig containing %q", err, want)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"insecure: true\nkafka: {brokers: [k]}\nstreams: [{name: s}]\nhttp: \":7071\"\n", "line 4: field http not found in type player.Config"},
		{"insecure: true\nkafka: {brokers: [k]}\nstreams: [{name: s, topik: t}]\n", "line 3: field topik not found in type player.StreamConfig"},
		{"kafka:\n  brokers: [\"${TEST_PLAYER_UNSET}\"]\nstreams: [{name: s}]\n", "line 2: kafka.brokers[0]: environment variable TEST_PLAYER_UNSET is not set"},
		// the top-level brokers and client_id of older files are gone: kafka.brokers, kafka.client_id
		{"insecure: true\nbrokers: [k]\nstreams: [{name: s}]\n", "line 2: field brokers not found in type player.Config"},
		{"insecure: true\nkafka: {brokers: [k]}\nclient_id: p\nstreams: [{name: s}]\n", "line 3: field client_id not found in type player.Config"},
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
	cfg := Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"k"}}, Streams: []StreamConfig{{Name: "s"}}}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if cfg.Streams[0].Topic != "" || cfg.Kafka.ClientID != "" {
		t.Errorf("New wrote the caller's config: %+v", cfg)
	}
}

// TestConfigEnv: ${NAME} is expanded in values after the YAML is parsed: a value with " #"
// is taken whole, and a reference in a comment needs no variable.
func TestConfigEnv(t *testing.T) {
	t.Setenv("TEST_PLAYER_ID", "player #1")
	path := filepath.Join(t.TempDir(), "player.yaml")
	body := "# client_id: ${TEST_PLAYER_COMMENTED_OUT}\ninsecure: true\nkafka:\n  brokers: [k]\n  client_id: ${TEST_PLAYER_ID}\nstreams: [{name: s}]\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil || c.Kafka.ClientID != "player #1" {
		t.Fatalf("%+v, %v", c, err)
	}
	if _, err := LoadConfig(path + ".missing"); !errors.Is(err, ErrConfig) {
		t.Errorf("missing file: %v", err)
	}
}

// TestConfigNegative: zero takes the default, a negative duration, count or size is refused
// with its YAML path, for every such key.
func TestConfigNegative(t *testing.T) {
	const base = "insecure: true\nstreams: [{name: s}]\n"
	for _, tc := range []struct{ yaml, want string }{
		{"max_batch_entries: -1", "max_batch_entries: -1 is negative"},
		{"max_batch_bytes: -1", "max_batch_bytes: -1 is negative"},
		{"target_budget_bytes: -1", "target_budget_bytes: -1 is negative"},
		{"ack_timeout: -1s", "ack_timeout: -1s is negative"},
		{"progress_interval: -1s", "progress_interval: -1s is negative"},
		{"history_bytes: -1", "history_bytes: -1 is negative"},
		{"shutdown_grace: -1s", "shutdown_grace: -1s is negative"},
		{"max_hello_views: -1", "max_hello_views: -1 is negative"},
		{"max_hello_bytes: -1", "max_hello_bytes: -1 is negative"},
		{"max_snapshot_bytes: -1", "max_snapshot_bytes: -1 is negative"},
		{"max_record_bytes: -1", "max_record_bytes: -1 is negative"},
		{"reload_interval: -1s", "reload_interval: -1s is negative"},
		{"delete_retention: -1s", "delete_retention: -1s is negative"},
		{"keepalive: {min_time: -1s}", "keepalive.min_time: -1s is negative"},
		{"keepalive: {time: -1s}", "keepalive.time: -1s is negative"},
		{"keepalive: {timeout: -1s}", "keepalive.timeout: -1s is negative"},
		{"kafka: {brokers: [k], timeout: -1s}", "kafka.timeout: -1s is negative"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			doc := base + tc.yaml + "\n"
			if !strings.HasPrefix(tc.yaml, "kafka:") {
				doc += "kafka: {brokers: [k]}\n"
			}
			if _, err := ParseConfig([]byte(doc)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig containing %q", err, tc.want)
			}
		})
	}
	c, err := ParseConfig([]byte(base + "kafka: {brokers: [k]}\nack_timeout: 0s\nmax_batch_bytes: 0\nkeepalive: {time: 0s}\n"))
	if err != nil || c.AckTimeout != DefaultAckTimeout || c.MaxBatchBytes != DefaultMaxBatchBytes || c.Keepalive.Time != DefaultKeepaliveTime ||
		c.Keepalive.MinTime != DefaultKeepaliveMinTime || c.ReloadInterval != 5*time.Second || c.DeleteRetention != 0 {
		t.Fatalf("zero values: %+v, %v", c, err)
	}
}

// TestKafkaWarnings: New warns of a weak Kafka setting it accepts (SASL PLAIN without TLS).
func TestKafkaWarnings(t *testing.T) {
	var logs bytes.Buffer
	cfg := Config{Insecure: true, Streams: []StreamConfig{{Name: "s"}}, Kafka: kafkaconn.Config{Brokers: []string{"k"},
		SASL: kafkaconn.SASL{Mechanism: kafkaconn.SASLPlain, User: "u", Password: "pw-SECRET"}}}
	p, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !strings.Contains(logs.String(), "kafka.sasl.mechanism: PLAIN without kafka.tls.enabled") || strings.Contains(logs.String(), "SECRET") {
		t.Errorf("no warning, or the password in it:\n%s", logs.String())
	}
}

// TestOpenTLSWarning: TLS without tokens and without a client CA authenticates no client:
// the start-up warning says that anyone who reaches the port may subscribe.
func TestOpenTLSWarning(t *testing.T) {
	pki := testenv.NewPKI(t)
	var logs testenv.LockedBuffer
	cfg := Config{TLS: TLSConfig{CertFile: pki.ServerCert, KeyFile: pki.ServerKey}, Streams: []StreamConfig{{Name: "s"}},
		Kafka: kafkaconn.Config{Brokers: []string{"k"}}}
	p, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(lis) }()
	waitFor(t, 5*time.Second, "the start-up lines", func() bool { return strings.Contains(logs.String(), "gRPC is served over TLS") })
	_ = p.Close()
	<-done
	if !strings.Contains(logs.String(), "anyone who can reach the gRPC port may subscribe") {
		t.Errorf("TLS without client authentication is not warned of:\n%s", logs.String())
	}
}
