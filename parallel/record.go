package parallel

import "context"

// Record is one unit of work. Key decides ordering under OrderKey; Offset is its position in
// the source log (strictly increasing across Submit calls, gaps allowed); Value is the payload.
type Record[T any] struct {
	Key    []byte
	Offset int64
	Value  T
	// Size is the number of bytes the record counts against Config.MaxBufferedBytes.
	// Zero means len(Key).
	Size int
}

func (r *Record[T]) size() int64 {
	if r.Size > 0 {
		return int64(r.Size)
	}
	return int64(len(r.Key))
}

// Handler processes one record. A nil error completes it; an error retries it (see Config).
type Handler[T any] func(ctx context.Context, r Record[T]) error

// BatchHandler processes up to Config.BatchSize ready records at once; they never contain two
// records that must be ordered relative to each other. An error retries the whole batch.
type BatchHandler[T any] func(ctx context.Context, rs []Record[T]) error

// DeadLetter receives a record whose attempts are exhausted under FailSkip (after exactly
// Config.MaxAttempts attempts), with the last error. It runs on a worker goroutine; the
// record is marked complete when it returns, unless a shutdown timed out meanwhile (ctx is
// then cancelled and the completion ignored).
type DeadLetter[T any] func(ctx context.Context, r Record[T], err error)
