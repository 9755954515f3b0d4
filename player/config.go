package player

import (
	"errors"
	"fmt"
	"time"

	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/kafkaconn"
)

// Defaults of Config (documented on its fields).
const (
	DefaultClientID          = "statecast-player"
	DefaultMaxBatchEntries   = 512
	DefaultMaxBatchBytes     = 1 << 20
	DefaultTargetBudgetBytes = 16 << 20
	DefaultAckTimeout        = 30 * time.Second
	DefaultProgressInterval  = time.Second
	DefaultHistoryBytes      = 64 << 20
	DefaultShutdownGrace     = 5 * time.Second

	// DefaultListen and DefaultHTTPAddr are the daemon's addresses: LoadConfig and
	// ParseConfig use them when the file does not set listen and http_addr. A Config built
	// in Go serves neither unless it sets them.
	DefaultListen   = ":7070"
	DefaultHTTPAddr = ":7071"
)

// StreamConfig is one stream served by the player.
type StreamConfig struct {
	// Name is what clients put in Hello.stream.
	Name string `yaml:"name"`
	// Topic is the Kafka topic (one partition). Default: Name.
	Topic string `yaml:"topic"`
}

// Config of a Player. Zero values take the documented defaults.
type Config struct {
	// Listen is the address Run serves gRPC on (Player, health, reflection). Empty: Run
	// does not serve gRPC; Serve does, on a listener of the caller's.
	Listen string `yaml:"listen"`
	// HTTPAddr is the address Run serves HTTP on (Handler: /metrics, /healthz, /status,
	// /status.json). Empty: not served.
	HTTPAddr string `yaml:"http_addr"`
	// Brokers are the Kafka bootstrap addresses (required).
	Brokers []string `yaml:"brokers"`
	// Streams served (at least one).
	Streams []StreamConfig `yaml:"streams"`
	// ClientID for Kafka. Default DefaultClientID.
	ClientID string `yaml:"client_id"`
	// MaxBatchEntries bounds a batch's entry count (default 512); a client hint may lower it.
	MaxBatchEntries int `yaml:"max_batch_entries"`
	// MaxBatchBytes bounds a batch's size (default 1 MiB); a client hint may lower it.
	MaxBatchBytes int64 `yaml:"max_batch_bytes"`
	// TargetBudgetBytes bounds the memory queued for one target (normal + catch-up
	// queues, default 16 MiB). Past it the target's main queue is dropped and it continues
	// from Kafka in RF without being disconnected. Sent-but-unacked batches are bounded by
	// the same amount (the send window). At least twice MaxBatchBytes.
	TargetBudgetBytes int64 `yaml:"target_budget_bytes"`
	// AckTimeout: a target with unacknowledged batches older than this is suspended
	// (default 30s).
	AckTimeout time.Duration `yaml:"ack_timeout"`
	// ProgressInterval: a target in N that was sent nothing for this long gets a Progress
	// message (default 1s).
	ProgressInterval time.Duration `yaml:"progress_interval"`
	// DeleteRetention overrides the topic's delete.retention.ms (the tombstone horizon)
	// when > 0; otherwise it is read from the broker at start-up.
	DeleteRetention time.Duration `yaml:"delete_retention"`
	// HistoryBytes bounds the per-stream in-memory history of recent records that recovery
	// sources read before falling back to Kafka (default 64 MiB; items are shared with the
	// materialized copy and the targets' queues).
	HistoryBytes int64 `yaml:"history_bytes"`
	// ShutdownGrace bounds a graceful stop of the gRPC server (default 5s).
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
}

// LoadConfig reads a YAML file (a Config) and returns it validated. The file is read as
// ParseConfig reads its bytes; errors wrap ErrConfig and name the file.
func LoadConfig(path string) (*Config, error) {
	c := Config{Listen: DefaultListen, HTTPAddr: DefaultHTTPAddr}
	if err := daemon.Load(path, &c, ErrConfig); err != nil {
		return nil, err
	}
	return &c, nil
}

// ParseConfig parses YAML bytes (a Config) and validates the result. listen and http_addr
// default to DefaultListen and DefaultHTTPAddr (set them to "" to serve neither). Unknown
// fields are rejected; ${NAME} in a value is replaced by the environment variable NAME
// after the YAML is parsed (an unset variable is an error naming it and the field; $${ is
// a literal ${; comments are not expanded), as in the distributor's files
// (docs/operations.md).
func ParseConfig(b []byte) (*Config, error) {
	c := Config{Listen: DefaultListen, HTTPAddr: DefaultHTTPAddr}
	if err := daemon.Parse(b, &c, ErrConfig); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate fills the defaults and checks the config. Errors wrap ErrConfig and name the
// field. New calls it; calling it again changes nothing.
func (c *Config) Validate() error {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.MaxBatchEntries <= 0 {
		c.MaxBatchEntries = DefaultMaxBatchEntries
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.TargetBudgetBytes <= 0 {
		c.TargetBudgetBytes = DefaultTargetBudgetBytes
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.HistoryBytes <= 0 {
		c.HistoryBytes = DefaultHistoryBytes
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(c.Brokers) == 0 {
		bad("brokers: required")
	}
	if len(c.Streams) == 0 {
		bad("streams: at least one stream is required")
	}
	seen := map[string]bool{}
	for i := range c.Streams {
		s := &c.Streams[i]
		if s.Topic == "" {
			s.Topic = s.Name
		}
		switch {
		case s.Name == "":
			bad("streams[%d].name: required", i)
		case seen[s.Name]:
			bad("stream %q: configured twice", s.Name)
		}
		seen[s.Name] = true
	}
	if c.TargetBudgetBytes < 2*c.MaxBatchBytes {
		bad("target_budget_bytes (%d) must be at least twice max_batch_bytes (%d)", c.TargetBudgetBytes, c.MaxBatchBytes)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// kafka is the player's Kafka connection: every sarama config of the player is built from
// it, so a connection setting (TLS, SASL, timeout) reaches every client from here.
func (c *Config) kafka() kafkaconn.Config {
	return kafkaconn.Config{Brokers: c.Brokers, ClientID: c.ClientID}
}
