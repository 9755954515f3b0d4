// Package distributor publishes SQL views of a PostgreSQL database into compacted,
// single-partition Kafka topics ("streams"), in the record format of schemas/README.md.
// Caches receive them through the player (package player) and cacheclient.
//
// A stream is one topic; it carries one or more views. A view is a named SELECT (joins
// allowed) with key columns: each row becomes one record keyed by the view and the key,
// and a row that disappears becomes a tombstone. A view is published in epochs (a full
// read framed by an epoch-begin and an epoch-end with the row count and a content hash)
// and, between them, by incremental polls of a timestamp or version column.
//
// # Use
//
// The command cmd/distributor runs it from a YAML file (docs/operations.md describes every
// field, the metrics and the operations). Embedded:
//
//	cfg, err := distributor.LoadConfig("distributor.yaml") // or build a Config in Go
//	if err != nil { … }
//	d, err := distributor.New(*cfg, distributor.WithLogger(log), distributor.WithRegisterer(reg))
//	if err != nil { … }
//	err = d.Run(ctx) // until ctx ends; nil after a graceful stop
//
// Config has a documented default for every field that has one; New validates it
// (Config.Validate) and fails with ErrConfig naming the stream, the view and the field. A
// stream's Defaults give its views the settings they leave unset. LoadConfig and
// ParseConfig read YAML with unknown fields rejected and ${NAME} expanded from the
// environment in values.
//
// Run serves HTTP on Config.HTTPAddr when it is set (Handler: /livez, /readyz, /healthz, /metrics) and on
// Config.Admin.Addr (AdminHandler: /status, POST /reconcile?view=NAME, behind its tokens;
// without tokens only on a loopback address), connects, creates every missing topic (compacted, one
// partition; an unusable existing one is refused), and runs every stream until ctx ends.
// WaitReady returns once every stream has published its start-up epochs; Reconcile asks
// for an epoch of one view now; Active reports whether this process holds every stream.
//
// # Guarantees
//
//   - Order: a stream's records are written by one idempotent producer, so the topic order
//     is the publication order. An epoch's records are never interleaved with a poll of the
//     same view; an epoch-end is written only after every record of its epoch was
//     acknowledged, and an epoch interrupted by an error or a shutdown has no end.
//   - Nothing half-published at start-up: every view of a stream is read in one REPEATABLE
//     READ, READ ONLY snapshot and fully validated (key columns exist, no NULL or duplicate
//     key, every column type mapped, no record above the broker's message limit) before its
//     first record is sent. A view that fails stops Run with a *ViewError (ErrView) and
//     nothing of it is published.
//   - No other state store: after a restart the topic is read back (key → content hash,
//     last epoch, watermark), and each view's start-up epoch publishes only the rows that
//     changed or appeared and tombstones for keys that vanished, deletes made while the
//     distributor was down included. Unchanged rows are never republished.
//   - One writer per stream: a stream publishes only while this process holds its
//     PostgreSQL advisory lock (checked every 500 ms; publishing stops when it is lost);
//     another process waits on the lock (standby) and takes over when the holder's session
//     ends.
//   - Deletes: an incremental poll does not see them; the next epoch does (a reconcile:
//     ViewSettings.RefreshCron, DefaultRefreshCron for a polled view that sets none,
//     Reconcile, or a restart) and publishes their tombstones.
//   - A poll's watermark never passes the database clock of the read that took it (for
//     numeric: never NaN or Infinity): a future, 'infinity' or NaN value is published but
//     does not move it, and a restored watermark that breaks the rule is dropped by the
//     start-up epoch. Transactions that commit up to the overlap (default DefaultOverlap or
//     DefaultOverlapVersions) after taking their value are still polled.
//   - Run-time errors (database or broker unreachable, a failing poll or reconcile) are
//     logged, counted in statecast_distributor_errors_total and retried with backoff; the
//     watermark and the content hashes advance only after the broker acknowledged.
//
// # Internals
//
// Files: config.go (Config, Validate), distributor.go (New, Run, Reconcile, WaitReady),
// http.go (Handler), stream.go (one stream's lifecycle and publisher loop), state.go
// (viewState), restore.go (state from the topic), read.go and codec.go (reading a view
// with the row encoder of schemas/record/pgjson), publish.go (epochs and polls), producer.go
// (the pipelined sarama AsyncProducer), topic.go, lock.go, listen.go, metrics.go.
//
// Run starts, per stream:
//
//   - the publisher loop (stream.run): the ONLY goroutine that reads view rows, publishes
//     records and touches viewState. Everything else asks it for work through channels.
//     The poll timer lives inside it (a time.Timer set to the earliest due poll);
//   - per send, one goroutine that counts the producer's acknowledgements (producer.go);
//   - the LISTEN waker (listen.go): a dedicated pgx connection that LISTENs to the views'
//     channels and, on a notification, sends a non-blocking wake-up for the view;
//   - the cron scheduler (robfig/cron/v3): sends a reconcile request;
//   - the lock watchdog (lock.go): pings the connection that holds pg_advisory_lock and
//     cancels the stream when it is lost, so a standby that takes the lock is the only
//     writer.
//
// Reconcile(ctx, view) sends a request to the publisher loop of the view's stream and waits
// for its result; a standby (lock not acquired yet) answers ErrNotActive. A failed poll or
// reconcile is counted and retried by the loop with backoff.
//
// Ordering and safety rules:
//
//   - A stream's records are produced from one goroutine through one producer (acks=all,
//     one request in flight): a send returns only when the broker acknowledged all of it.
//   - viewState (hashes, watermark, epoch) changes only after the broker acknowledged the
//     records it describes.
//   - An epoch's read buffers the rows to publish (about key + value + 40 bytes per row),
//     so that the whole view is validated before the first record is sent; the snapshot
//     transaction is rolled back as soon as the read is done.
//   - A start-up epoch's mode is "snapshot" on an empty topic, "reconcile" otherwise.
package distributor
