// Package distributor publishes SQL views of a PostgreSQL database into compacted,
// single-partition Kafka topics ("streams"), in the record format of schemas/README.md.
// Caches receive them through the player (package player) and cacheclient.
//
// A stream is one topic; it carries one or more views. A view is a named SELECT (joins
// allowed) with key columns: each row becomes one record keyed by the view and the key,
// and a row that disappears becomes a tombstone. A view is published in epochs (a full
// read framed by an epoch-begin and an epoch-end with the row count and a content hash)
// and, between them, by what changed. A stream's capture says how it finds the changes:
//
//   - wal (CaptureWAL, the default): every commit, from a logical replication slot
//     (pgoutput; package internal/capture). Cycles re-read the view rows a prefix of the
//     commits touched, in a snapshot that shows exactly that prefix, and publish them as
//     one source transaction ended by a position record (the source position: every
//     commit up to it is in the stream; cacheclient's WaitFor waits on it).
//   - poll (CapturePoll, where no slot is allowed): incremental polls of a timestamp or
//     version column with an overlap, woken by LISTEN, and scheduled reconciles for the
//     deletes a poll cannot see.
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
// WaitReady returns once every stream has published its start-up epochs (a wal stream: its
// first cycle); Reconcile asks
// for an epoch of one view now; Active reports whether this process holds every stream;
// Status reports every stream and view (the admin /status page). Without running,
// CheckDatabase and CheckKafka check a configuration against PostgreSQL and Kafka, and
// Dependencies says how each wal view's base tables reach its rows (cachectl validate,
// distributor -check); none of them changes anything.
//
// # Guarantees
//
//   - Order: a stream's records are written by one transactional producer, so the topic
//     order is the publication order. An epoch's records are never interleaved with a poll
//     of the same view.
//   - All or nothing: each source transaction (an epoch, a poll, a WAL cycle: its records
//     and the position record that ends it) is one Kafka transaction. An epoch interrupted
//     by an error, a shutdown or a lost lock is aborted: none of its records is ever read
//     (every reader reads read_committed), so the stream never holds a half-published epoch.
//     The one exception is an epoch (or a WAL cycle) so large that it is still being sent
//     after half the transaction timeout (KafkaConfig.TransactionTimeout): it is committed
//     in parts there, and an interruption then leaves a prefix without an epoch-end or a
//     position record, which the next epoch or cycle completes. A WAL cycle whose changes
//     reach a large share of a view reads it whole and streams its changed rows into the
//     cycle's transaction as it reads them (wal_bulk.go): a row that stops the view aborts
//     that transaction, and the cycle is published again without the view.
//   - Nothing half-published at start-up: every view of a stream is read in one REPEATABLE
//     READ, READ ONLY snapshot (with capture wal, the slot's exported snapshot or one whose
//     place in the commit order is known) and fully validated (key columns exist, no NULL or
//     duplicate key, every column type mapped, no record above the broker's message limit)
//     before its first record is sent.
//   - A bad view stops alone: a view that fails on its own data or SQL (a *ViewError,
//     ErrView) publishes nothing of that read, keeps its last published rows, is listed as
//     stale in every position record and is retried with a full read after a backoff,
//     which resumes it once the row or the SQL is fixed; the other views go on.
//   - Every commit (capture wal): an insert, update or delete of a view's base table
//     reaches the view's rows (re-read by key, by the reverse map of a joined table, or by
//     a full re-read of the view). The slot's confirmed position advances only after the
//     broker committed the cycle that reflects it, so a lost connection or a restart
//     streams again what was not published; a lost slot is created again and the next
//     full reads publish what changed meanwhile.
//   - No other state store: after a restart the topic is read back (key → content hash,
//     last epoch and the definition it was read with, watermark, last position), and each
//     view's start-up epoch publishes only the rows that changed or appeared and tombstones
//     for keys that vanished, deletes made while the distributor was down included.
//     Unchanged rows are never republished. A wal stream on its existing slot reads in full
//     only the views whose definition changed or that were stopped or behind: the others
//     continue from the slot, which sends again every commit it was not told of
//     (wal_start.go).
//   - One writer per stream: a stream publishes only while this process holds its
//     PostgreSQL advisory lock (a polling stream's own, or the one of the wal streams that
//     share a slot; checked every 500 ms; publishing stops when it is lost); another
//     process waits on the lock (standby) and takes over when the holder's session ends. The lock alone cannot stop what the old holder already handed to its producer
//     (sarama retries a request for as long as its timeouts allow), so Kafka fences it: a
//     new active first opens its producer with the stream's transactional id
//     (StreamConfig.TransactionalID), which aborts the old holder's open transaction and
//     makes the broker refuse its every later write (ErrFenced); only then does it read the
//     stream back. No record of an old active lands after the new active started, and a
//     fenced process goes back to standby as after a lost lock.
//   - Deletes with capture poll: an incremental poll does not see them; the next epoch
//     does (a reconcile: ViewSettings.RefreshCron, DefaultRefreshCron for a polled view
//     that sets none, Reconcile, or a restart) and publishes their tombstones.
//   - A poll's watermark never passes the database clock of the read that took it (for
//     numeric: never NaN or Infinity): a future, 'infinity' or NaN value is published but
//     does not move it, and a restored watermark that breaks the rule is dropped by the
//     start-up epoch. Transactions that commit up to the overlap (default DefaultOverlap or
//     DefaultOverlapVersions) after taking their value are still polled.
//   - Run-time errors (database or broker unreachable, a failing poll or reconcile) are
//     logged, counted in statecast_distributor_errors_total, shown as the stream's last
//     error (Status, /readyz) and retried with backoff; the watermark and the content
//     hashes advance only after the broker acknowledged. A login PostgreSQL refuses (a
//     wrong password, no pg_hba.conf entry, a role that may not log in or lacks
//     REPLICATION) stops Run with ErrPostgresAuth instead, as Kafka's refusals do.
//
// # Internals
//
// Files, by what they hold:
//
//   - The API: distributor.go (Distributor: New, Run, Reconcile, WaitReady, Active, Views),
//     config.go (Config and its parts, the defaults, LoadConfig, ParseConfig, Validate),
//     config_capture.go (a stream's capture settings checked: wal's slot, publication,
//     replica identity, read settings and connections; what polling needs of a view),
//     admin.go (AdminConfig, TokensConfig, TLSConfig), errors.go (the sentinels,
//     ViewError), http.go (Handler, AdminHandler), health.go (/readyz: Readiness and the
//     dependency checks), status.go (Status, the streams' last errors and the status
//     page), metrics.go, check.go (CheckDatabase, CheckKafka), dependencies.go
//     (Dependencies), pgauth.go (which PostgreSQL login refusals stop Run:
//     ErrPostgresAuth).
//   - A stream's life: group.go (the streams one advisory lock makes active together, and
//     their activation), lock.go (the advisory lock and its watchdog), topic.go (creating
//     and checking the topics, and watching that they are not replaced), producer.go (the
//     pipelined, transactional sarama AsyncProducer), txn.go (a source transaction: its
//     records as one Kafka transaction, and the state applied once it is committed),
//     restore.go (the state from the topic), state.go (viewState), stream.go (one stream:
//     its producer, the start-up epochs and the publisher loop of capture poll, retries and
//     backoff), failure.go (a view stopped by its own data or SQL, its retry, and which
//     PostgreSQL errors are transient), progress.go (the progress log and counter of long
//     reads).
//   - Reading a view: read.go (a read in a snapshot: the rows, their hashes, what to
//     publish), codec.go (the row encoder of schemas/record/pgjson, keys, the incremental
//     maximum).
//   - Capture poll: incremental.go (the incremental column: its types, the poll query, the
//     bound on the watermark), publish.go (the watermark and its diagnostics), listen.go
//     (the LISTEN waker).
//   - Capture wal, on top of internal/capture (which reads the slot): wal.go (a session:
//     the views' analysis, the publication, the slot, the receiver, the loop and the idle
//     position records), wal_cycle.go (one cycle: snapshot, prefix, re-reads, publish,
//     confirm; the tables locked), wal_view.go (how changed base rows become changed view rows: keys, reverse
//     maps, hops, reads of the changed values), wal_read.go (a cycle's views read at once,
//     their lookups in rounds of one pipeline per connection, on more connections in the
//     cycle's exported snapshot when they read long), wal_behind.go (a view re-read in full off
//     the cycles, in a snapshot a cycle exports, following the stream at a position of
//     its own meanwhile), wal_reason.go (why a view is read in full), wal_flush.go (an
//     idle stream has the server flush its WAL), wal_start.go (what a session on an
//     existing slot reads in full), wal_ddl.go (schema changes of the base tables while
//     a stream runs), wal_oversize.go (captured values over the record size limit,
//     which the receiver does not copy), viewdef.go (a view's definition hash, recorded in
//     its epochs), slotwatch.go (the slot's lag in bytes and time and its retention,
//     measured apart from the capture).
//
// Run starts the HTTP servers, the dependency checks (watchDeps) and, per group (a polling
// stream alone, or the wal streams that share a slot), its lifecycle (group.run): standby
// until it holds the group's advisory lock, then the activation (group.activeRun), which
// runs
//
//   - the lock watchdog (lock.go): pings the connection that holds pg_advisory_lock and
//     ends the activation when it is lost, so a standby that takes the lock is the only
//     writer; and the topic watcher (topic.go), which ends it when a topic is replaced;
//   - for a polling stream, the publisher loop (stream.loop): the ONLY goroutine that
//     reads view rows, publishes records and touches viewState. Everything else asks it
//     for work through channels. The poll timer lives inside it (a time.Timer set to the
//     earliest due poll). Beside it the LISTEN waker (listen.go), a dedicated pgx
//     connection that LISTENs to the views' channels and, on a notification, sends a
//     non-blocking wake-up for the view;
//   - for a wal group, sessions (wal.go), one after the other: per session the receiver
//     (capture.Receiver.Run), the only goroutine on the replication connection, and per
//     stream of the group its session loop (walSession.loop), which is that stream's
//     publisher loop with the same ownership: it alone reads, publishes, and touches
//     viewState and its walSession — but for a view it has handed to a background
//     re-read (wal_behind.go: one goroutine per such read, on a connection of its own,
//     reading the view's state while the loop leaves that view alone, and handing its
//     result back to the loop to publish);
//   - for a wal group, the slot watcher (slotwatch.go): every health_interval, on a
//     connection of its own, it reads each slot's confirmed and restart positions and the
//     server's WAL end into the slot gauges and Status — apart from the session loops,
//     which wait on Kafka;
//   - per stream, the cron scheduler (robfig/cron/v3), which sends reconcile requests;
//   - per send, one goroutine that counts the producer's acknowledgements; per commit, one
//     that runs it, so that an ended ctx need not wait for it (producer.go); per long read,
//     one that logs its progress (progress.go).
//
// Reconcile(ctx, view) sends a request to the publisher loop of the view's stream and waits
// for its result: the poll loop reads the view at once, a wal session reads it in full in
// its next cycle and answers once that cycle is published; a standby (lock not acquired
// yet) answers ErrNotActive. A failed poll or reconcile is counted and retried by the loop
// with backoff. Status reads what the loops record under a mutex of each stream's; the
// active and serving flags are atomic.
//
// An activation (group.activeRun, once the lock is held) opens each stream's producer
// before anything else — InitProducerId fences the previous active's producer and ends its
// open transaction — then restores the state from the topic (read_committed, up to the
// last stable offset: final, since nothing of the previous active can land any more), then
// publishes. A producer that cannot abort a failed transaction (fenced, or beyond sarama's
// retries) is closed and ends the activation; a new one is opened only by the next
// activation, with the lock held again, so a process that lost its lock can never fence
// the legitimate active.
//
// The transaction boundary is the source transaction (txnOut), not each send: one Kafka
// transaction per WAL cycle, poll or epoch, committed once its last record (the position
// record) is acknowledged. Per send would leave the state between two sends of one cycle
// visible (an epoch's rows without its end); per cycle makes "no half-published epoch" and
// the source transaction's atomicity the broker's own guarantee, and needs no wait between
// a cycle's body and its tail (an epoch-end or a position record after a failed batch is
// aborted with it). Its cost per cycle: an AddPartitionsToTxn before the first record and
// an EndTxn after the last (two round trips to the transaction coordinator), and readers
// see the cycle when the commit marker is written. The limit is the transaction timeout:
// a start-up snapshot of many millions of rows is one transaction; past half the timeout
// it is committed in parts (producer.publish), so that the broker never aborts it.
//
// Ordering and safety rules:
//
//   - A stream's records are produced from one goroutine through one producer (acks=all,
//     one request in flight): a publish returns only when the broker committed all of it.
//   - viewState (hashes, watermark, epoch) changes only after the broker committed the
//     records it describes.
//   - An epoch's read buffers the rows to publish (about key + value + 40 bytes per row),
//     so that the whole view is validated before the first record is sent; the snapshot
//     transaction is rolled back as soon as the read is done.
//   - A start-up epoch's mode is "snapshot" on an empty topic, "reconcile" otherwise.
package distributor
