// Package checker records what each target of the player received and reports violations
// of the delivery guarantees by name: ordered, unique, reliable, resumable (the first four
// of docs/architecture.md, Guarantees; the list below says how each is checked).
//
// A test creates one Checker, calls Hello / Batch / Progress / SnapshotBegin / SnapshotEnd /
// Resync for every frame a target sends or receives (in the order the target saw them), and
// at the end, once faults have stopped and everything has been delivered, reads the ground
// truth from the topic (ReadTopic) and calls Check(truth). Recording is cheap; all the
// reasoning happens in Check, so the truth can be read after the run.
//
// A target is identified by its client id and lives across reconnects and player restarts.
// Each Hello starts a new session (one gRPC stream). What a target has applied is modelled
// as its "lineage": the indexes it received since its last snapshot (plus that snapshot,
// which covers every index <= its X). A Hello with resume index r tells the checker that the
// target holds exactly what it received up to r: indexes > r received in earlier sessions
// are forgotten (the target never applied them, e.g. it was killed before persisting), so
// their redelivery is legitimate. A Hello without resume index is a new target: its lineage
// is cleared and a snapshot bootstrap must follow.
//
// The guarantees, as checked:
//
//   - ordered: within a session, live entry indexes strictly increase, starting above the
//     resume index (or above the snapshot's X); progress never goes back; snapshot entries
//     strictly increase and are <= X.
//   - unique: no index enters the target's lineage twice, nor an index at or below what the
//     target already holds (its snapshot's X or its resume index); a snapshot may re-send
//     state only after a Hello without resume index or a ResyncRequired on the same session.
//   - reliable: at the end, every record of the target's views (as of its last Hello) up to
//     the last index of the truth is in its lineage or covered by its last snapshot or by
//     the resume index of its last Hello (the target says it holds everything up to it;
//     a record skipped before that point was already reported as resumable); every
//     snapshot holds the latest non-tombstone record <= X of each key whose whole history in
//     the truth is <= X (for keys written again after X a compacted truth cannot tell).
//   - resumable: a session resuming from i (or continuing after a snapshot at X) receives
//     exactly the records of its views after i, in order, without gaps: a delivered entry or a
//     progress index p implies every record of the views in (previous, p] was delivered;
//     delivered entries exist in the truth with the same key, view, kind and tombstone flag,
//     and belong to the session's views.
//
// Position records (KindPosition, no view) belong to every subscription: for ordered,
// unique, resumable and reliable they are entries of every target like its views' records,
// and a snapshot holds the latest one <= X (checked when it is the latest of the truth).
// They are never rows: the snapshot-content check of rows ignores them.
//
// Selections (HelloSelect: a session that receives only some rows of a view, by a filter
// or a hash shard) are checked against the test's own model of the filter, a Selection
// per view: a row record that passes is delivered as it is; one that does not (or a
// tombstone) is delivered as a tombstone of its key at its own index when the target held
// the key (a move out, at the index of the change that moved it, hence inside its source
// transaction: atomic), never as a row, and may be skipped otherwise; a tombstone of a key
// the target does not hold is harmless and accepted. Snapshots hold exactly the latest
// passing rows; at the end the target holds exactly the rows of the truth that pass
// (reliable), its state modelled from its snapshot and live entries.
//
// Without truth (Check(nil)) only the structural checks run (order, duplicates, snapshot
// framing). Options.AllowCompacted accepts delivered indexes missing from the truth (records
// compacted or deleted between delivery and ReadTopic). Gone(target) exempts a target that
// stopped for good from reliable.
//
// All methods are safe for concurrent use; events of one target must be recorded in the
// order that target observed them (the usual case: one goroutine per target).
//
// Files: checker.go (Checker and its recording methods, HelloSelect and Selection,
// Guarantee and its sentinels, Violation, Error, Options), proto.go (recording from the player's protobuf messages:
// HelloMsg, Response, EntryOf), topic.go (ReadTopic, the truth read back from Kafka),
// truth.go (the truth indexed by position, the views a target subscribes to), evaluate.go
// (Check's reasoning, one target's events replayed against the truth).
package checker
