// Package parallel is a key-ordered parallel processing engine: records that arrive in
// offset order (from one Kafka partition, or any other ordered log) are handed to a pool of
// workers, so one slow record no longer stalls the whole stream, while order is kept where
// it matters. It is the Go counterpart of Confluent's Parallel Consumer, without Kafka:
// the engine knows nothing about sarama; the sarama consumer-group consumer built on it
// lives in the subpackage parallel/saramapc, the Prometheus metrics in parallel/pcprom.
//
// # Records, ordering and offsets
//
// A [Record] carries a key, an offset and a payload of any type T. Offsets must strictly
// increase from one [Engine.Submit] to the next; gaps are allowed (compaction and
// transaction markers leave holes in a Kafka partition; an index that skips numbers is fine).
//
// [Ordering] selects what must stay in order:
//
//   - [OrderKey] (default): records with the same key run one at a time, in offset order;
//     different keys run in parallel. Nil and empty keys share one queue.
//   - [OrderPartition]: every record runs one at a time, in offset order (a serial consumer).
//   - [OrderUnordered]: any record may run at any time, up to MaxConcurrency at once.
//
// When more records may start than there are free workers, the engine starts first the one
// whose key has the longest backlog (the heaviest key bounds the total time), then the
// lowest offset (which advances the watermark).
//
// # Completion tracking, watermark and checkpoint metadata
//
// The engine tracks the offsets it has observed. The low watermark ([Progress.Watermark]) is
// the lowest observed offset not yet complete, or the highest observed offset + 1 when
// everything observed is complete: it is the offset a consumer commits (Kafka's "next offset
// to read"). The offsets above the watermark that are already complete are encoded into a
// compact, versioned, text-safe string ([Checkpoint.Encode]) — run-length or bitset, whichever
// is smaller — bounded by Config.MaxMetadataBytes (default 4096, Kafka's default
// offset.metadata.max.bytes). Offsets that were never observed between two observed ones do
// not exist in the log and are counted as complete, which keeps the runs long.
// When the estimated metadata size reaches 75 % of the bound, intake pauses (Submit blocks)
// and only the record at the watermark is dispatched, until the watermark advances.
// If the set still does not fit, Encode drops the highest completed offsets (they will be
// processed again after a restart: at-least-once, never lost).
//
// Memory is bounded: queued plus in-flight records are limited by MaxBufferedRecords and
// MaxBufferedBytes, and the observed offsets tracked from the watermark on (completed ones
// behind a stuck record included) by MaxBufferedRecords; Submit blocks at either bound.
//
// After a restart, pass the decoded [Checkpoint] as Config.Resume: submitted records below
// its watermark or inside its completed set are marked complete without running.
//
// # Commit modes
//
// The engine decides what may be committed (Progress: the watermark and the encoded
// completed set); a consumer decides when and how. The Kafka consumer in parallel/saramapc
// has the three commit modes of Confluent's Parallel Consumer, side by side (each one has an
// example at saramapc.New):
//
//   - CommitAsync (default): a committer goroutine commits the offset and metadata every
//     interval; a failed commit is retried at the next tick. At least once; a crash repeats
//     up to one interval of completed records. Costs nothing on the processing path.
//   - CommitSync: the commit runs between submissions, and a failed commit ends the
//     consumer. At least once, never more than one interval ahead of a confirmed commit.
//     Costs an intake pause of one round trip per interval, and a stop on a transient
//     coordinator failure.
//   - CommitTransactional: the handler's output records and the offset and metadata that
//     mark their inputs complete are committed in one Kafka transaction. Exactly once for
//     outputs read with read_committed, across crashes, rebalances and zombies (KIP-447
//     fencing). Costs memory for the outputs until their transaction, output latency of up
//     to one interval, and a bounded number of transactions per second; processing does not
//     wait.
//
// # Retries and failures
//
// A handler error is retried up to Config.MaxAttempts attempts in total, waiting
// Config.Backoff(attempt) between attempts; the record's key stays blocked meanwhile (no
// later record of that key overtakes it), but the worker is free for other keys. When the
// attempts are exhausted, Config.OnFailure decides: [FailStop] stops the engine ([Engine.Err]
// returns a *[RecordError]); [FailSkip] hands the record to Config.DeadLetter and marks it
// complete, so other keys — and later records of the same key — continue. A record reaches
// DeadLetter after exactly MaxAttempts attempts.
//
// # Goroutines and concurrency rules
//
//   - New starts Config.MaxConcurrency worker goroutines; nothing else runs in the
//     background except retry timers. All of them exit before Shutdown/Close return.
//   - Submit may be called from several goroutines, but offsets must increase in call
//     order, so in practice one goroutine (the poll loop) submits. Submit blocks while the
//     buffer is full (Config.MaxBufferedRecords / MaxBufferedBytes) or the metadata is at
//     75 % of its bound; it returns ctx.Err() when ctx ends, ErrClosed after Shutdown began,
//     and the stop error after a FailStop failure.
//   - Handlers run on worker goroutines, concurrently with each other (within the ordering
//     rules) and with Submit. The ctx a handler receives is cancelled when a no-drain
//     shutdown times out or the engine stops on a failure. Handlers must not call Submit or
//     Shutdown of their own engine.
//   - DeadLetter runs on the worker goroutine that exhausted the attempts, before the record
//     is marked complete; it may block (to produce the record somewhere durable, say):
//     the record is marked complete when it returns, unless a shutdown timed out meanwhile
//     (its context is then cancelled, and the completion is ignored like any other after
//     the timeout), so a record whose dead letter never got out is never committed.
//   - Progress and Stats are safe at any time from any goroutine; they take the engine lock
//     briefly. Progress encodes the metadata (O(records in flight and queued)).
//   - Shutdown(ctx, Drain) stops intake and waits for every queued record; Shutdown(ctx,
//     NoDrain) stops intake, drops queued records and waits for the in-flight ones. Both
//     return when done, or when ctx ends: then handler contexts are cancelled, completions
//     that arrive later are ignored, and ErrShutdownTimeout is returned without waiting for
//     handlers that ignore their context (Done is closed when the last worker exits).
//     Progress after Shutdown is the final checkpoint to commit.
//   - A handler panic is recovered and treated as an error wrapping ErrHandlerPanic.
//
// # Files
//
// engine.go (Engine: New, Submit, the workers, retries, Progress, Stats, Shutdown),
// config.go (Config, Ordering, FailurePolicy, ShutdownMode, Backoff, Hooks, Validate),
// record.go (Record, Handler, BatchHandler, DeadLetter), ready.go (the queue of records
// that may start, heaviest backlog first), tracker.go (the observed offsets, the
// watermark and the metadata estimate), checkpoint.go (Checkpoint and its encoding),
// errors.go (the sentinels, RecordError). ready.go and tracker.go are not safe for
// concurrent use: the engine's lock guards them.
package parallel
