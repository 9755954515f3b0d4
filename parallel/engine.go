package parallel

import (
	"context"
)

// Engine runs records through a worker pool under an ordering rule. See the package
// documentation for its goroutines and concurrency rules.
type Engine[T any] struct {
	cfg Config[T]
}

// Progress is a consistent snapshot of what can be committed.
type Progress struct {
	// Watermark is the lowest observed offset not complete, or the highest observed + 1.
	// Before any record was observed it is Resume's watermark, or -1 without Resume.
	Watermark int64
	// Metadata is the encoded completed set above Watermark (Checkpoint.Encode).
	Metadata string
}

// Stats are the engine's counters and gauges.
type Stats struct {
	InFlight      int   // records being processed (or waiting for a retry)
	Queued        int   // records submitted and not yet dispatched
	Completed     int64 // records completed successfully (including resumed skips)
	Failed        int64 // records whose attempts were exhausted
	Retried       int64 // failed attempts that were retried
	Watermark     int64
	MetadataBytes int // estimated size of the encoded metadata
	Paused        bool
}

// New validates cfg, applies defaults and starts the workers.
func New[T any](cfg Config[T]) (*Engine[T], error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Engine[T]{cfg: cfg}, nil
}

// Submit queues r, blocking while the buffer is full.
func (e *Engine[T]) Submit(ctx context.Context, r Record[T]) error { return nil }

// Progress returns the committable watermark and metadata.
func (e *Engine[T]) Progress() Progress { return Progress{} }

// Stats returns a snapshot of counters.
func (e *Engine[T]) Stats() Stats { return Stats{} }

// Err returns the error that stopped the engine (a *RecordError under FailStop), or nil.
func (e *Engine[T]) Err() error { return nil }

// Done is closed when the engine stopped: after a FailStop failure or a Shutdown.
func (e *Engine[T]) Done() <-chan struct{} { return nil }

// Shutdown stops intake and waits per mode until ctx ends; see the package documentation.
func (e *Engine[T]) Shutdown(ctx context.Context, mode ShutdownMode) error { return nil }

// Close is Shutdown(context.Background(), NoDrain).
func (e *Engine[T]) Close() error { return e.Shutdown(context.Background(), NoDrain) }
