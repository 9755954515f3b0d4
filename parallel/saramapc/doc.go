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
// # Offsets and metadata
//
// For each claimed partition the consumer commits the engine's low watermark with the
// encoded set of completed offsets above it as the offset metadata, through an explicit
// OffsetCommit request (sarama's MarkOffset cannot update metadata at an unchanged offset).
// Commits run every Config.CommitInterval when the progress changed, and once more when the
// claim ends. After a restart or a rebalance, the new owner fetches the committed offset and
// metadata and skips the offsets the metadata marks complete.
//
// A committed offset below the log start or past its end is reset by sarama according to
// Config.Sarama.Consumer.Offsets.Initial (Consumer.Group.ResetInvalidOffsets, on by default);
// the metadata then belongs to another offset and is ignored. Metadata that cannot be decoded
// is handled by Config.InvalidMetadata (fail the claim, or ignore it and reprocess).
//
// # Goroutines and concurrency rules
//
//   - Run owns the sarama client and consumer group; it calls Consume in a loop until ctx
//     ends or a claim fails, and closes everything before it returns.
//   - sarama runs ConsumeClaim on its own goroutine per claimed partition. That goroutine
//     submits the partition's messages to the claim's engine, in offset order.
//   - Each claim has one committer goroutine (periodic commits) and the engine's workers,
//     which run the user's handler concurrently under the engine's ordering rules.
//   - On revoke (session end): submitting stops, the engine shuts down without draining,
//     waiting at most Config.RevokeTimeout for in-flight records, the final progress is
//     committed with the session's generation, and only then ConsumeClaim returns and sarama
//     releases the partition. Results of an earlier assignment are never committed by a later
//     one: each claim has its own engine, and the broker rejects commits of an old generation.
//   - When Run's ctx ends and Config.Drain is set, queued records are finished first (at
//     most Config.DrainTimeout).
package saramapc
