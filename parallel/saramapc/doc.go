// Package saramapc is a Kafka parallel consumer: a sarama consumer group whose partitions
// are processed by parallel engines (one per claimed partition), with key-ordered parallelism
// inside a partition — the Go counterpart of Confluent's Parallel Consumer.
//
//	c, err := saramapc.New(saramapc.Config{
//		Brokers: brokers, Group: "pricing", Topics: []string{"orders"},
//		Engine: parallel.Config[saramapc.Message]{Handler: handle}, // key order by default
//	}, saramapc.WithLogger(log), saramapc.WithRegisterer(reg))
//	if err != nil { … }
//	err = c.Run(ctx) // until ctx ends or a claim fails
//
// New validates the Config (Config.Validate fills the documented defaults; errors wrap
// ErrConfig), as the distributor and the player do with theirs.
//
// # Commit modes
//
// Config.Commit selects one of the three commit modes of the Parallel Consumer. All three
// commit the same thing for a partition — the engine's low watermark as the group's offset,
// with the completed offsets above it as the offset metadata — and differ in when, on which
// goroutine, and with what else (the examples of [New] show each one).
//
//   - [CommitAsync] (default; the Parallel Consumer's PERIODIC_CONSUMER_ASYNCHRONOUS). A
//     committer goroutine per claim commits every Config.CommitInterval when the progress
//     changed; processing never waits for it, and a failed commit is logged and retried at
//     the next tick. Guarantee: at least once. After a crash the records completed since the
//     last successful commit run again (one interval of work; more while commits fail). Cost:
//     one OffsetCommit request per partition and interval, off the processing path.
//   - [CommitSync] (PERIODIC_CONSUMER_SYNC). The commit runs on the goroutine that feeds the
//     engine, between two submissions, every CommitInterval (also when intake is blocked at
//     the buffer bound); a commit that fails, the final one included, ends Run with the
//     error. Guarantee: at least once, and the consumer never goes on while its progress
//     cannot be committed, so a crash never repeats more than one interval of work. Cost:
//     intake stops for one OffsetCommit round trip per interval (the workers go on with the
//     buffered records), and a transient coordinator failure stops the consumer instead of
//     being retried at the next tick.
//   - [CommitTransactional] (PERIODIC_TRANSACTIONAL_PRODUCER). Config.TxnHandler runs
//     instead of Engine.Handler and sends its output records through the [Producer] it is
//     handed; every CommitInterval, one Kafka transaction commits the outputs of the records
//     completed since the last one together with the offset and the metadata that mark them
//     complete. Guarantee: exactly once for what reaches Kafka: read with read_committed,
//     each input's outputs appear once, in the input's key order, across crashes,
//     rebalances and paused instances; the outputs of failed attempts are dropped. Effects
//     outside Kafka (a database write in the handler) stay at least once. Cost: outputs are
//     held in memory until their transaction (bounded by Config.MaxPendingBytes) and are
//     visible to read_committed readers only after it, up to one interval later; one
//     transaction per claimed partition and interval, one at a time per consumer, each
//     several round trips (AddPartitionsToTxn, Produce, AddOffsetsToTxn, TxnOffsetCommit,
//     EndTxn), which bounds the transactions per second; a producer and its connections.
//     The processing itself does not wait: the committer sends the outputs
//     (docs/BENCHMARKS.md, BenchmarkCommitModes, has the measured cost).
//
// # Exactly once: how the transactional mode keeps it
//
// A handler's outputs are not sent while it runs: they are attached to the input's offset
// when the handler returns nil, before the engine marks the record complete. A commit takes
// a Progress snapshot, decodes the metadata exactly as it will be committed (the highest
// completed offsets may be left out when the set does not fit), and sends, in one
// transaction, the outputs of precisely the offsets that this checkpoint marks complete, in
// offset order, then the offset and metadata (AddOffsetsToTxnWithGroupMetadata) and
// commits. Records completing meanwhile wait for the next transaction. So a committed
// checkpoint and the committed outputs always describe the same set of input records; a
// transaction that fails is aborted and its outputs are sent again by the next one.
//
// Ownership is checked by the broker (KIP-447, which sarama supports): the offsets of a
// transaction carry the claim's group generation and member id, and the group coordinator
// refuses them once the partition has a newer owner. An instance that was paused past its
// session (a zombie) and resumes therefore cannot commit its outputs: its transaction is
// aborted ([ErrFenced]) and the claim ends. A new owner reads its start offset with
// require_stable (sarama's offset manager and the consumer's own fetch of the metadata both
// ask for it under read_committed): while a transaction that commits offsets of the partition is open, it
// waits, so it never starts below what that transaction is about to commit. This is why
// CommitTransactional requires IsolationLevel ReadCommitted.
//
// One transactional producer serves all the claims of a consumer (transactional.id =
// Config.TransactionalID). The alternative, a producer per partition whose transactional.id
// names the partition, fences through the transactional id instead, but costs a producer,
// its connections and an InitProducerId for every partition at every rebalance; with
// KIP-447 the group generation does the fencing and one producer suffices. Keep the
// TransactionalID stable across restarts of one instance (and unique among instances): the
// restarted producer then aborts at once a transaction its crashed predecessor left open,
// instead of blocking read_committed readers and the next owner's start until the
// transaction timeout (10s in the default Config.Producer).
//
// Retries, key order and bounded memory work as in the other modes: a failed attempt's
// outputs are discarded; records of a key run one at a time, so their outputs are sent in
// offset order and a later record of a key is never committed before an earlier one; past
// half of MaxPendingBytes a commit starts early, and at the bound a handler's outputs wait
// for room before they are taken.
//
// # Isolation level
//
// Config.IsolationLevel defaults to [ReadCommitted]: records of aborted transactions — and
// of transactions still open — are never handed to a handler; they leave gaps in the
// offsets, which the engine handles. [ReadUncommitted] processes them too (Validate sets
// Sarama.Consumer.IsolationLevel from it, whatever the sarama config said).
//
// # Dead letters
//
// Under Engine.OnFailure FailSkip, a record whose attempts are exhausted goes to
// Engine.DeadLetter, a callback. Config.DeadLetterTopic is the ready-made sink beside it: the
// record is produced to that topic with its key, value and headers plus [HeaderTopic],
// [HeaderPartition], [HeaderOffset], [HeaderAttempts] and [HeaderError] (the callback, if
// set, runs after). In the offset modes the dead letter is produced before the record is
// marked complete (at least once); one that cannot be produced holds the record and ends Run
// without committing it. Under CommitTransactional it joins the transaction that commits
// its offset (exactly once). [DeadLetterMessage] builds the same message for a callback that
// sends with its own producer.
//
// # Offsets and metadata
//
// The watermark and metadata are committed through explicit requests (sarama's MarkOffset
// cannot update metadata at an unchanged offset), on a client of their own so that they do
// not wait behind the consumer's long-polling fetches. Every mode commits once more when
// the claim ends. After a restart or a rebalance, the new owner fetches the committed offset
// and metadata and skips the offsets the metadata marks complete.
//
// A committed offset below the log start or past its end is reset by sarama according to
// Config.Sarama.Consumer.Offsets.Initial (Consumer.Group.ResetInvalidOffsets, on by default);
// the metadata then belongs to another offset and is ignored. Metadata that cannot be decoded
// is handled by Config.InvalidMetadata (fail the claim, or ignore it and reprocess).
//
// # Goroutines and concurrency rules
//
//   - Run owns the sarama clients, the consumer group and the producer (transactions, dead
//     letters); it calls Consume in a loop until ctx ends or a claim fails, and closes
//     everything before it returns.
//   - sarama runs ConsumeClaim on its own goroutine per claimed partition. That goroutine
//     submits the partition's messages to the claim's engine, in offset order, and under
//     CommitSync also commits.
//   - Each claim has one committer goroutine (CommitAsync, CommitTransactional) and the
//     engine's workers, which run the user's handler concurrently under the engine's
//     ordering rules. Transactions of different claims take turns on the one producer.
//   - On revoke (session end): submitting stops, the engine shuts down without draining,
//     waiting at most Config.RevokeTimeout for in-flight records, the final progress is
//     committed with the session's generation, and only then ConsumeClaim returns and sarama
//     releases the partition. Results of an earlier assignment are never committed by a later
//     one: each claim has its own engine, and the broker rejects commits of an old generation.
//   - When Run's ctx ends and Config.Drain is set, queued records are finished first (at
//     most Config.DrainTimeout).
//
// # Files
//
// consumer.go (Consumer: New, Run, Stats, CommitStats; the group handler), config.go
// (Config, CommitMode, IsolationLevel, MetadataPolicy, Validate), claim.go (one claimed
// partition: its resume point, its engine, the intake), claim_commit.go (the claim's
// commits and its committer goroutine), offsets.go (committing and fetching offsets with
// metadata through explicit requests: CommitProgress, FetchCheckpoint), txn.go
// (CommitTransactional: TxnHandler, Producer, the outputs pending their transaction),
// deadletter.go (the dead-letter topic, DeadLetterMessage).
package saramapc
