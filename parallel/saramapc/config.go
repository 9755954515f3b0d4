package saramapc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// CommitMode selects how a claim's progress reaches Kafka (see the package documentation
// for what each one guarantees and costs).
type CommitMode int

const (
	// CommitAsync commits the consumer offset and the completed-offsets metadata every
	// CommitInterval from a committer goroutine; processing never waits for a commit, and a
	// failed commit is logged and retried at the next tick (default).
	CommitAsync CommitMode = iota
	// CommitSync commits on the goroutine that feeds the engine, between submissions, every
	// CommitInterval: intake waits for the broker's answer, and a commit that fails ends Run
	// with the error.
	CommitSync
	// CommitTransactional runs TxnHandler, whose output records are committed in one Kafka
	// transaction together with the consumer offset and the metadata: exactly once.
	CommitTransactional
)

func (m CommitMode) String() string {
	switch m {
	case CommitAsync:
		return "async"
	case CommitSync:
		return "sync"
	case CommitTransactional:
		return "transactional"
	}
	return fmt.Sprintf("CommitMode(%d)", int(m))
}

// IsolationLevel selects which records of transactional producers the consumer reads.
type IsolationLevel int

const (
	// ReadCommitted reads only records of committed transactions (and non-transactional
	// ones): records of aborted transactions are never processed (default).
	ReadCommitted IsolationLevel = iota
	// ReadUncommitted reads every record, those of aborted and still open transactions too.
	ReadUncommitted
)

func (l IsolationLevel) String() string {
	switch l {
	case ReadCommitted:
		return "read_committed"
	case ReadUncommitted:
		return "read_uncommitted"
	}
	return fmt.Sprintf("IsolationLevel(%d)", int(l))
}

// DefaultClientID is the client id of Config.Kafka when it sets none.
const DefaultClientID = "statecast-parallel"

// DefaultMaxPendingBytes bounds the output records held for the next transaction.
const DefaultMaxPendingBytes = 64 << 20

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
	// MaxConcurrency, retries, failure policy, buffer bounds. Resume is set by the consumer;
	// under CommitTransactional, Handler is set by the consumer too (it runs TxnHandler).
	Engine parallel.Config[Message]
	// Commit is the commit mode, default CommitAsync.
	Commit CommitMode
	// IsolationLevel, default ReadCommitted: records of aborted transactions are skipped.
	// Validate sets it on Sarama (Consumer.IsolationLevel), whatever Sarama said.
	// CommitTransactional requires ReadCommitted.
	IsolationLevel IsolationLevel
	// TxnHandler processes one record under CommitTransactional (required there, refused
	// otherwise) and sends its output records through out.
	TxnHandler TxnHandler
	// TransactionalID is the transactional.id of the consumer's producer under
	// CommitTransactional. It must be unique among the running consumers; keep it stable
	// across restarts of one instance so that a restart aborts a transaction its crashed
	// predecessor left open at once, instead of after the transaction timeout. Default:
	// Group plus a random suffix.
	TransactionalID string
	// MaxPendingBytes bounds the output records (key + value bytes) held for the next
	// transaction under CommitTransactional, default 64 MiB: past half of it a commit starts
	// early; at the bound a handler's outputs wait before they are taken.
	MaxPendingBytes int64
	// DeadLetterTopic, when set, receives every record whose attempts are exhausted under
	// Engine.OnFailure FailSkip (required with it): the original key, value and headers
	// plus the headers HeaderTopic, HeaderPartition, HeaderOffset, HeaderAttempts and
	// HeaderError. Engine.DeadLetter, if set, is called after the record was produced.
	DeadLetterTopic string
	// Producer is the client configuration of the consumer's producer (transactions and
	// dead letters). Default: kafkaconn.ProducerConfig settings (idempotent, acks=all) with
	// Sarama's Net and Version, the hash partitioner, and a 10s transaction timeout.
	// Validate sets Producer.Transaction.ID from TransactionalID.
	Producer *sarama.Config
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

// Validate fills the defaults and checks the config, Engine's settings included (as
// parallel.Config.Validate checks them). Errors wrap ErrConfig and name the field by its Go
// path (Engine.MaxConcurrency; the Kafka block's fields as kafkaconn names them,
// kafka.tls.ca_file); every problem is reported at once. Zero takes the default; a negative
// duration, count or size is refused. New calls it.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(c.Kafka.Brokers) == 0 {
		c.Kafka.Brokers = c.Brokers
	}
	c.Brokers = c.Kafka.Brokers
	if len(c.Brokers) == 0 {
		bad("Brokers: required (or Kafka.Brokers)")
	} else if c.Sarama == nil || c.Sarama == c.built {
		if c.Kafka.ClientID == "" {
			c.Kafka.ClientID = DefaultClientID
		}
		if err := c.Kafka.Validate(); err != nil {
			errs = append(errs, err)
		}
	} else if c.Kafka.TLS.Enabled || c.Kafka.SASL.Mechanism != "" || c.Kafka.Timeout != 0 {
		bad("Kafka.TLS, Kafka.SASL, Kafka.Timeout: not used with Sarama: set them in one place")
	}
	if c.Group == "" {
		bad("Group: required")
	}
	if len(c.Topics) == 0 {
		bad("Topics: required")
	}
	switch c.Commit {
	case CommitAsync, CommitSync:
		if c.Engine.Handler == nil && c.Engine.BatchHandler == nil {
			bad("Engine.Handler: required (or Engine.BatchHandler) with Commit %v", c.Commit)
		}
		if c.TxnHandler != nil {
			bad("TxnHandler: needs Commit %v", CommitTransactional)
		}
	case CommitTransactional:
		if c.TxnHandler == nil {
			bad("TxnHandler: required with Commit %v", c.Commit)
		}
		if c.Engine.Handler != nil || c.Engine.BatchHandler != nil {
			bad("Engine.Handler, Engine.BatchHandler: must be nil with Commit %v (TxnHandler runs instead)", c.Commit)
		}
		if c.IsolationLevel != ReadCommitted {
			// The claim's start offset is read with require_stable only under
			// read_committed; otherwise it may predate a transaction that is committing.
			bad("IsolationLevel: Commit %v needs ReadCommitted", c.Commit)
		}
	default:
		bad("Commit: unknown CommitMode %d", c.Commit)
	}
	if c.IsolationLevel != ReadCommitted && c.IsolationLevel != ReadUncommitted {
		bad("IsolationLevel: unknown value %d", c.IsolationLevel)
	}
	if c.DeadLetterTopic != "" && c.Engine.OnFailure != parallel.FailSkip {
		bad("DeadLetterTopic: needs Engine.OnFailure FailSkip")
	}
	// Engine's own settings, checked now rather than at the first claim. Its handler is
	// checked above (mode by mode) and set by the consumer under CommitTransactional: a
	// stand-in keeps the engine's check to the other fields.
	engine := c.Engine
	engine.Handler, engine.BatchHandler = func(context.Context, parallel.Record[Message]) error { return nil }, nil
	if err := engine.Validate(); err != nil {
		bad("Engine: %w", err)
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"CommitInterval", c.CommitInterval}, {"RevokeTimeout", c.RevokeTimeout}, {"DrainTimeout", c.DrainTimeout}} {
		if f.v < 0 {
			bad("%s: %v is negative (0 takes the default)", f.name, f.v)
		}
	}
	if c.MaxPendingBytes < 0 {
		bad("MaxPendingBytes: %d is negative (0 takes the default)", c.MaxPendingBytes)
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
	c.Sarama.Consumer.IsolationLevel = sarama.ReadCommitted
	if c.IsolationLevel == ReadUncommitted {
		c.Sarama.Consumer.IsolationLevel = sarama.ReadUncommitted
	}
	if c.Engine.MaxAttempts == 0 {
		// filled here rather than left to the engine: the dead-letter headers report it
		c.Engine.MaxAttempts = parallel.DefaultMaxAttempts
	}
	if c.MaxPendingBytes == 0 {
		c.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if c.Commit == CommitTransactional && c.TransactionalID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		c.TransactionalID = c.Group + "-" + hex.EncodeToString(b[:])
	}
	if c.needsProducer() {
		if c.Producer == nil {
			c.Producer = defaultProducerConfig(c.Sarama)
		}
		c.Producer.Producer.Transaction.ID = ""
		if c.Commit == CommitTransactional {
			c.Producer.Producer.Transaction.ID = c.TransactionalID
		}
	}
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

func (c *Config) needsProducer() bool {
	return c.Commit == CommitTransactional || c.DeadLetterTopic != ""
}

// defaultProducerConfig is the idempotent producer configuration of statecast with the
// connection settings (Net: TLS, SASL, timeouts) and the protocol version of the consumer's.
func defaultProducerConfig(consumer *sarama.Config) *sarama.Config {
	p := kafkaconn.ProducerConfig(consumer.ClientID)
	p.Version = consumer.Version
	p.Net = consumer.Net
	p.Net.MaxOpenRequests = 1 // required by the idempotent producer
	p.Metadata = consumer.Metadata
	// Output records go to the partition of their key (statecast's own streams have one
	// partition and use the manual partitioner).
	p.Producer.Partitioner = sarama.NewHashPartitioner
	// A transaction spans only the sending of outputs that are already computed, so a
	// short timeout suffices; it bounds how long a crashed instance's open transaction
	// blocks read_committed readers and the next owner's offset fetch.
	p.Producer.Transaction.Timeout = 10 * time.Second
	return p
}
