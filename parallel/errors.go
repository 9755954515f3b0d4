package parallel

import (
	"errors"
	"fmt"
)

var (
	// ErrConfig is wrapped by the errors of Config.Validate (and so of New).
	ErrConfig = errors.New("parallel: invalid config")
	// ErrClosed is returned by Submit after Shutdown or Close began.
	ErrClosed = errors.New("parallel: engine closed")
	// ErrOffsetOrder is returned by Submit when an offset is not above the previous one.
	ErrOffsetOrder = errors.New("parallel: offset not increasing")
	// ErrMetadata is wrapped by DecodeCheckpoint for malformed or foreign metadata.
	ErrMetadata = errors.New("parallel: invalid checkpoint metadata")
	// ErrHandlerPanic is wrapped by the error a panicking handler is treated as.
	ErrHandlerPanic = errors.New("parallel: handler panicked")
	// ErrShutdownTimeout is returned by Shutdown when ctx ended before the work did.
	ErrShutdownTimeout = errors.New("parallel: shutdown timed out")
)

// RecordError reports a record whose attempts were exhausted under FailStop.
type RecordError struct {
	Offset   int64
	Key      []byte
	Attempts int
	Err      error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("parallel: record at offset %d (key %q) failed after %d attempts: %v", e.Offset, e.Key, e.Attempts, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }
