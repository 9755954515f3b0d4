package player

import (
	"fmt"
	"time"
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
	// Brokers are the Kafka bootstrap addresses (required).
	Brokers []string `yaml:"brokers"`
	// Streams served (at least one).
	Streams []StreamConfig `yaml:"streams"`
	// ClientID for Kafka. Default "statecast-player".
	ClientID string `yaml:"client_id"`
	// MaxBatchEntries bounds a batch's entry count (default 512); a client hint may lower it.
	MaxBatchEntries int `yaml:"max_batch_entries"`
	// MaxBatchBytes bounds a batch's size (default 1 MiB); a client hint may lower it.
	MaxBatchBytes int64 `yaml:"max_batch_bytes"`
	// TargetBudgetBytes bounds the memory queued for one target (normal + catch-up
	// queues, default 16 MiB). Past it the target's main queue is dropped and it continues
	// from Kafka in RF without being disconnected. Sent-but-unacked batches are bounded by
	// the same amount (the send window).
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

func (c *Config) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = "statecast-player"
	}
	if c.MaxBatchEntries <= 0 {
		c.MaxBatchEntries = 512
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = 1 << 20
	}
	if c.TargetBudgetBytes <= 0 {
		c.TargetBudgetBytes = 16 << 20
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = 30 * time.Second
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = time.Second
	}
	if c.HistoryBytes <= 0 {
		c.HistoryBytes = 64 << 20
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	for i := range c.Streams {
		if c.Streams[i].Topic == "" {
			c.Streams[i].Topic = c.Streams[i].Name
		}
	}
}

func (c *Config) validate() error {
	if len(c.Brokers) == 0 {
		return fmt.Errorf("%w: brokers is empty", ErrConfig)
	}
	if len(c.Streams) == 0 {
		return fmt.Errorf("%w: no streams", ErrConfig)
	}
	seen := map[string]bool{}
	for _, s := range c.Streams {
		if s.Name == "" {
			return fmt.Errorf("%w: stream without a name", ErrConfig)
		}
		if seen[s.Name] {
			return fmt.Errorf("%w: stream %q twice", ErrConfig, s.Name)
		}
		seen[s.Name] = true
	}
	if c.TargetBudgetBytes < 2*c.MaxBatchBytes {
		return fmt.Errorf("%w: target_budget_bytes (%d) must be at least twice max_batch_bytes (%d)", ErrConfig, c.TargetBudgetBytes, c.MaxBatchBytes)
	}
	return nil
}
