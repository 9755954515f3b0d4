// Package distributor publishes SQL views of a PostgreSQL database into compacted,
// single-partition Kafka topics ("streams"), in the record format of schemas/README.md.
//
// # Types
//
//   - Config (config.go): the YAML configuration, loaded by LoadConfig, validated by
//     Config.Validate (errors name the stream/view and the field). KafkaTLS, KafkaSASL and
//     KafkaConfig.Timeout (kafkaclient.go) are validated there too (TLS files are loaded) and
//     applied to every sarama config the package makes (admin, restore, producer).
//   - Distributor (distributor.go): New validates a Config; Run(ctx) runs every stream until
//     ctx ends; Reconcile(ctx, view) asks for a reconcile epoch on demand; WaitReady waits
//     until every stream published its start-up epoch.
//   - stream (stream.go): one per configured stream (topic). It owns the advisory lock,
//     the producer, the in-memory state of its views and the publisher loop.
//   - viewState (state.go): per view, key → content hash of the live rows, the last epoch
//     and the incremental watermark. Rebuilt from the topic at start-up (restore.go).
//   - readView (read.go) reads and validates a view in a snapshot transaction, with the row
//     encoder of schemas/record/pgjson (codec.go); publishEpoch/publishPoll (publish.go)
//     write the records through producer (producer.go): one sarama AsyncProducer fed as a
//     pipeline, whose acknowledgements are counted before a send returns.
//
// Public API (stable): LoadConfig/ParseConfig, New(cfg, WithLogger, WithRegistry),
// Run(ctx), Reconcile(ctx, view), WaitReady(ctx), Active(), Views(), Handler().
//
// # Goroutines
//
// Run starts, per stream:
//
//   - the publisher loop (stream.run): the ONLY goroutine that reads view rows, publishes
//     records and touches viewState. Everything else asks it for work through channels:
//   - the poll timer lives inside the publisher loop (a time.Timer set to the earliest due poll);
//   - per send, one goroutine that counts the producer's acknowledgements (producer.go);
//   - the LISTEN waker (listen.go): a dedicated pgx connection that LISTENs to the views'
//     channels and, on a notification, sends a non-blocking wake-up for the view;
//   - the cron scheduler (robfig/cron/v3): sends a reconcile request, non-blocking;
//   - the lock watchdog (lock.go): pings the connection that holds pg_advisory_lock and cancels
//     the stream when it is lost, so a standby that takes the lock is the only writer.
//
// Reconcile(ctx, view) sends a request to the publisher loop of the view's stream and waits for
// its result. A standby (lock not acquired yet) answers ErrNotActive. A failed poll or
// reconcile is counted in the errors metric and retried by the loop with backoff.
//
// # Ordering and safety rules
//
//   - A stream's records are produced by one idempotent producer (acks=all, one request in
//     flight), from one goroutine, so the topic order is the publication order.
//   - An epoch's records for a view are never interleaved with a poll of the same view (both
//     run on the publisher loop). An epoch-end is sent only after every record of the epoch was
//     acknowledged; on shutdown or error mid-epoch no epoch-end is written.
//   - viewState (hashes, watermark) changes only after the broker acknowledged the records.
//   - At start-up every view is fully read and validated (key columns exist, no NULL or
//     duplicate keys, every column type mapped, no record above the broker's message limit)
//     before anything is published; any error stops start-up and nothing is published.
//     The rows to publish are buffered by that read.
//   - Restart: the topic is read from its start to its end; then every view runs a start-up
//     epoch in mode "reconcile" (only changed/missing rows and tombstones for vanished keys are
//     published), which also catches deletes that happened while the distributor was down.
package distributor
