package parallel

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/statecast/statecast/internal/backoff"
)

// Ordering selects which records must run one at a time, in offset order.
type Ordering int

const (
	// OrderKey keeps records with the same key in order (default).
	OrderKey Ordering = iota
	// OrderPartition keeps all records in order: one at a time.
	OrderPartition
	// OrderUnordered runs records in any order.
	OrderUnordered
)

func (o Ordering) String() string {
	switch o {
	case OrderKey:
		return "key"
	case OrderPartition:
		return "partition"
	case OrderUnordered:
		return "unordered"
	}
	return fmt.Sprintf("Ordering(%d)", int(o))
}

// FailurePolicy decides what happens when a record's attempts are exhausted.
type FailurePolicy int

const (
	// FailStop stops the engine: no more records are dispatched, Submit returns the
	// *RecordError, the watermark stays below the failed record (default).
	FailStop FailurePolicy = iota
	// FailSkip hands the record to Config.DeadLetter and marks it complete.
	FailSkip
)

// ShutdownMode selects what Shutdown waits for.
type ShutdownMode int

const (
	// Drain finishes every queued record before returning.
	Drain ShutdownMode = iota
	// NoDrain finishes the in-flight records only; queued ones are dropped (they stay
	// above the watermark and are read again after a restart).
	NoDrain
)

// Backoff returns how long to wait before attempt number attempt+1, after attempt attempts
// failed (attempt >= 1).
type Backoff func(attempt int) time.Duration

// ExponentialBackoff returns a Backoff that doubles from base up to max, jittered: the wait
// before attempt n+1 is drawn from the upper half of min(base·2ⁿ⁻¹, max) and is never below
// base, so that keys failing together do not retry in step.
func ExponentialBackoff(base, max time.Duration) Backoff {
	p := backoff.Policy{Min: base, Max: max}
	return func(attempt int) time.Duration { return p.Delay(attempt - 1) }
}

// Defaults.
const (
	DefaultMaxConcurrency     = 16
	DefaultMaxBufferedRecords = 10000
	DefaultMaxBufferedBytes   = 64 << 20
	DefaultMaxAttempts        = 3
	DefaultMaxMetadataBytes   = 4096
)

// Config configures an Engine. Exactly one of Handler and BatchHandler must be set.
type Config[T any] struct {
	// Ordering, default OrderKey.
	Ordering Ordering
	// MaxConcurrency is the number of worker goroutines, default 16.
	MaxConcurrency int
	// Handler processes one record at a time.
	Handler Handler[T]
	// BatchHandler processes up to BatchSize ready records at a time.
	BatchHandler BatchHandler[T]
	// BatchSize bounds a batch for BatchHandler, default 1 (ignored with Handler).
	BatchSize int
	// MaxBufferedRecords bounds queued + in-flight records, default 10000.
	MaxBufferedRecords int
	// MaxBufferedBytes bounds the Size of queued + in-flight records, default 64 MiB.
	// A single record larger than the bound is admitted when the buffer is empty.
	MaxBufferedBytes int64
	// MaxAttempts is the number of attempts per record (1 = no retry), default 3.
	MaxAttempts int
	// Backoff between attempts, default ExponentialBackoff(100ms, 10s).
	Backoff Backoff
	// OnFailure decides what happens when attempts are exhausted, default FailStop.
	OnFailure FailurePolicy
	// DeadLetter receives skipped records under FailSkip (may be nil: they are only logged).
	DeadLetter DeadLetter[T]
	// MaxMetadataBytes bounds the encoded checkpoint, default 4096.
	MaxMetadataBytes int
	// Resume marks the offsets of an earlier run as complete (below its watermark or in its
	// completed set): such records are not processed again.
	Resume *Checkpoint
	// Logger, default discards.
	Logger *slog.Logger
	// Hooks observe the engine (all optional).
	Hooks Hooks
}

// Hooks are optional callbacks for metrics; they run on the goroutine named and must be fast
// and must not call back into the engine.
type Hooks struct {
	// OnComplete runs on a worker after a record completed (ok or dead-lettered).
	OnComplete func(offset int64, attempts int, failed bool)
	// OnRetry runs on a worker after a failed attempt that will be retried.
	OnRetry func(offset int64, attempt int, err error)
}

// Validate fills the defaults (documented on each field) and checks the config. Errors wrap
// ErrConfig and name the field (MaxConcurrency); every problem is reported at once. Zero
// takes the default; a negative count or size is refused. New calls it; calling it again
// changes nothing.
func (c *Config[T]) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if (c.Handler == nil) == (c.BatchHandler == nil) {
		bad("Handler, BatchHandler: exactly one must be set")
	}
	if c.Ordering < OrderKey || c.Ordering > OrderUnordered {
		bad("Ordering: unknown value %d", c.Ordering)
	}
	if c.OnFailure != FailStop && c.OnFailure != FailSkip {
		bad("OnFailure: unknown FailurePolicy %d", c.OnFailure)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxConcurrency", int64(c.MaxConcurrency)}, {"BatchSize", int64(c.BatchSize)},
		{"MaxBufferedRecords", int64(c.MaxBufferedRecords)}, {"MaxBufferedBytes", c.MaxBufferedBytes},
		{"MaxAttempts", int64(c.MaxAttempts)}, {"MaxMetadataBytes", int64(c.MaxMetadataBytes)},
	} {
		if f.v < 0 {
			bad("%s: %d is negative (0 takes the default)", f.name, f.v)
		}
	}
	if c.MaxMetadataBytes > 0 && c.MaxMetadataBytes < 64 {
		bad("MaxMetadataBytes: %d is below 64", c.MaxMetadataBytes)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	if c.BatchSize == 0 || c.Handler != nil {
		c.BatchSize = 1
	}
	if c.MaxBufferedRecords == 0 {
		c.MaxBufferedRecords = DefaultMaxBufferedRecords
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Backoff == nil {
		c.Backoff = ExponentialBackoff(100*time.Millisecond, 10*time.Second)
	}
	if c.MaxMetadataBytes == 0 {
		c.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
