package saramapc

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/parallel"
)

// Message is the payload type of the engines: the sarama message.
type Message = *sarama.ConsumerMessage

// MetadataPolicy decides what happens when committed metadata cannot be decoded.
type MetadataPolicy int

const (
	// MetadataFail fails the claim and Run returns the error (default).
	MetadataFail MetadataPolicy = iota
	// MetadataIgnore logs, ignores the metadata and reprocesses from the committed offset.
	MetadataIgnore
)

// DefaultClientID is the client id of Config.Kafka when it sets none.
const DefaultClientID = "statecast-parallel"

// ErrConfig: the Config is invalid (New, Config.Validate).
var ErrConfig = errors.New("saramapc: invalid config")

// Config configures a Consumer. Zero values take the documented defaults.
type Config struct {
	Brokers []string // required, here or in Kafka.Brokers
	Group   string   // required
	Topics  []string // required
	// Kafka is the connection: brokers, client id (default DefaultClientID), timeout, TLS,
	// SASL, as the daemons' kafka block (kafkaconn.Config). Its Brokers default to
	// Brokers. Validate loads its TLS files and builds Sarama from it.
	Kafka kafkaconn.Config
	// Sarama is the client configuration, default Kafka.SaramaConfig(); one given here is
	// used as it is (Kafka's TLS, SASL and timeout must then be empty). Validate turns
	// auto-commit off in it (the consumer commits itself).
	Sarama *sarama.Config
	built  *sarama.Config // the Sarama that Validate built from Kafka (Validate again: not the caller's)
	// Engine configures each partition's engine: Handler or BatchHandler, Ordering,
	// MaxConcurrency, retries, failure policy, buffer bounds. Resume is set by the consumer.
	Engine parallel.Config[Message]
	// CommitInterval between periodic commits, default 1s.
	CommitInterval time.Duration
	// RevokeTimeout bounds the wait for in-flight records when a claim ends, default 10s.
	RevokeTimeout time.Duration
	// Drain finishes queued records when Run's ctx ends (at most DrainTimeout, default 30s).
	Drain        bool
	DrainTimeout time.Duration
	// InvalidMetadata, default MetadataFail.
	InvalidMetadata MetadataPolicy
}

// Validate fills the defaults and checks the config. Errors wrap ErrConfig. New calls it.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Kafka.Brokers) == 0 {
		c.Kafka.Brokers = c.Brokers
	}
	c.Brokers = c.Kafka.Brokers
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no Brokers"))
	} else if c.Sarama == nil || c.Sarama == c.built {
		if c.Kafka.ClientID == "" {
			c.Kafka.ClientID = DefaultClientID
		}
		if err := c.Kafka.Validate(); err != nil {
			errs = append(errs, err)
		}
	} else if c.Kafka.TLS.Enabled || c.Kafka.SASL.Mechanism != "" || c.Kafka.Timeout != 0 {
		errs = append(errs, errors.New("the tls, sasl and timeout of Kafka are not used with Sarama: set them in one place"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("no Group"))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("no Topics"))
	}
	if c.Engine.Handler == nil && c.Engine.BatchHandler == nil {
		errs = append(errs, errors.New("no Engine.Handler"))
	}
	if c.CommitInterval < 0 || c.RevokeTimeout < 0 || c.DrainTimeout < 0 {
		errs = append(errs, errors.New("negative duration"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	if c.Sarama == nil {
		c.Sarama = c.Kafka.SaramaConfig()
		c.built = c.Sarama
	}
	c.Sarama.Consumer.Offsets.AutoCommit.Enable = false
	c.Sarama.Consumer.Return.Errors = true
	if c.CommitInterval == 0 {
		c.CommitInterval = time.Second
	}
	if c.RevokeTimeout == 0 {
		c.RevokeTimeout = 10 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
	return nil
}
