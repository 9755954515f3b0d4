// Package player is the LogPlayer of the paper "LogPlayer: Fault-tolerant Exactly-once
// Delivery using gRPC Asynchronous Streaming": it delivers streams (each a
// single-partition Kafka topic) exactly once and in order to subscribed targets, over one
// gRPC bidirectional stream each (statecast.v1.Player/Subscribe, schemas/proto), or as
// channels of one stream (Player/SubscribeMany: many targets of one client, such as a
// gateway's per-user filtered subscriptions, for a fraction of the memory). A target is
// one subscription; cacheclient is the usual client.
//
// # Use
//
//	p, err := player.New(player.Config{Kafka: kafkaconn.Config{Brokers: b}, Streams: []player.StreamConfig{{Name: "s", Topic: t}},
//		TLS: player.TLSConfig{CertFile: "tls.crt", KeyFile: "tls.key"}, Tokens: player.TokensConfig{File: "tokens"}},
//		player.WithLogger(log), player.WithRegisterer(reg))
//	go p.Run(ctx)      // Kafka fetchers; returns when ctx ends or Close is called, or when Kafka did not answer within StartupTimeout
//	go p.Serve(lis)    // gRPC: Player, health (SERVING while the player is ready), reflection if enabled
//	p.WaitReady(ctx)   // optional: the player is ready (Readiness)
//	p.Close()          // targets end with Unavailable; waits for every goroutine
//
// Status reports every stream and target (state, acks, lag, queued bytes, recoveries);
// the metrics are registered with WithRegisterer.
//
// # States
//
// A stream is starting (its materialized copy loads), ready, in error (its main fetcher
// or the check of its topic fails now: connected targets stay, nothing new arrives) or
// unavailable (its topic is missing, has several partitions or cannot be read, or its
// main fetcher stopped: a Hello is refused with Unavailable naming the stream, the topic
// and why, and the stream is tried again with backoff). Each state follows from the
// current cause, and ends when the check that found the cause passes again; the last
// error stays in Status with its time. A stream that cannot be served never stops the
// others. The player is ready (Readiness: /readyz, gRPC health) once Kafka answered at
// start-up, no stream is still loading its copy for the first time, and at least one
// stream is ready. Run waits for Kafka at start-up for Config.StartupTimeout.
//
// # Security
//
// gRPC is served over TLS (Config.TLS, certificate files read again when they change) or,
// only when Config.Insecure says so, in plaintext. A client authenticates with a bearer
// token (Config.Tokens, kept as hashes) or a client certificate (mutual TLS, TLS's
// client_ca_file); its principal is the token's name or the certificate's identity.
// Config.Access grants principals streams and views (patterns); a Hello outside its grant
// ends with PermissionDenied naming the view, one naming a view the stream does not carry
// with NotFound (ErrUnknownView). A target is known by its principal and instance id
// (Hello.client_id): only a reconnect of the same instance replaces it (logged, counted in
// statecast_player_replacements_total). The metrics are labelled by service
// (Hello.service), not by instance. docs/security.md has the whole model.
//
// # What a target gets
//
// A client sends Hello (stream, views, the index it resumes from, optional batch limits),
// then cumulative Acks of the highest index it applied. The player answers with:
//
//   - no resume index: a snapshot of the target's views (SnapshotBegin X, the rows,
//     SnapshotEnd X), then the live entries after X;
//   - resume index r: exactly the entries of its views after r, first caught up (from
//     the player's memory of recent records, else from Kafka), then live;
//   - r below the log start, at or past the log end, or followed by records older than
//     the topic's delete.retention.ms (tombstones may be gone): ResyncRequired, then the
//     snapshot, on the same stream. A recovery that finds the log start moved past it
//     (retention or DeleteRecords while the target was behind) does the same.
//
// Position records (schemas/README.md: they end source transactions and carry the source
// position) belong to the stream: every target receives them whatever its views, and a
// snapshot carries the latest one at its index.
//
// Entries come in batches bounded by Config.MaxBatchEntries and MaxBatchBytes; a batch
// that reaches its bound is cut after its last position entry when entries of a source
// transaction follow it (a transaction larger than a batch still spans batches). A target
// whose views see no entry for Config.ProgressInterval gets a Progress message, so the
// index it resumes from stays fresh; it gets one as soon as it has caught up, too. Every
// message carries head_index, the player's main position, from which the client knows its
// lag. A stream ends with the gRPC status of why (StatusTable): no valid credentials, a
// stream or view not granted, a bad Hello or Ack, an unknown stream or view, an ack
// time-out (Config.AckTimeout), a newer connection of the same instance, a stream that
// cannot be served now (its topic restarted, missing or unreadable), or Close.
//
// # Selections: filters and shards
//
// A Hello (protocol version 2) may carry a Selection per view: a filter, a CEL expression
// (cel.dev/cel-go) over the view's columns, a hash shard (shard_index of shard_count:
// record.Shard, xxhash64 of the record key mod n), and a column list (rows are sent with
// their value cut to those members, rowVals.projected: one projection per record and
// column set, shared by the targets that list the same columns; the filter reads the
// whole row). The target then receives of that view
// only the rows that pass both, ANDed with the mandatory filter of its grant (Grant.Filter)
// when it has one. A row that starts passing arrives as the row; one that stops passing,
// or is deleted while it passed, as a tombstone of its key at the index of the change that
// moved it, so the move is inside the same source transaction and applied atomically with
// it. Position records and a selected view's epoch-begin and poll records are delivered
// as to any target; its epoch-end records are not (their count and hash describe the
// whole view: a client that checks them would resync forever). A client of protocol
// version 1 sends no selection and is served as before (a grant's filter applies to it
// too).
//
// Filters are compiled once, at the Hello, in an environment that declares each column
// of the view (as its rows in the materialized copy show them) as a dyn variable: the
// record format carries JSON, whose values are typed per row (integers as int, other
// numbers as double, strings, bools, null, lists, maps). A filter that does not parse,
// names a column the view does not have, or does not yield a bool is refused with
// InvalidArgument naming the view and the column; a view with no row yet has its filter
// parsed only. A filter is at most 4 KiB and an evaluation at most 10,000 of CEL's cost
// units; an evaluation that fails (a missing column, types that do not compare, the cost
// bound) does not pass. A resume index is valid only with the selections it was read with:
// a client that changes them subscribes again without one (a snapshot).
//
// Every path filters through one function, selection.choose (selection.go), with what the
// path knows of the key's previous state: the dispatcher (stream.apply, dispatch.go)
// knows it exactly, the materialized copy's previous row of the key, and sends the
// tombstone only when that row passed; a snapshot (snapshotSource, through pushCatchup)
// sends the rows that pass and nothing else; a recovery from the history or from Kafka
// (pushCatchup, chooseCatchup) does not know what the target held before its resume
// index, so for a key it has not delivered yet a row that does not pass becomes a
// tombstone (a delete of a key the client does not hold is a no-op), and from then on it
// knows (target.recSeen, at most 65,536 keys per recovery, dropped when it completes).
// Resyncs are snapshots. The row is decoded once per record for every target (rowVals);
// the tombstone is made once per record. The dispatcher does not evaluate every selecting
// target's filter: the selections of a view are indexed (viewIndex, filterindex.go) by
// their filter's top-level equality or IN conjunct (by column value), else by their
// shard, else scanned, and a row change goes to the targets whose indexed value is the
// new or the previous row's (the only ones that can receive a row or a move out), so its
// cost grows with the targets it concerns, not with all of them. A filter that is one
// equality or IN alone (`tenant == "x"`, `k in [1, 2]`) keeps no compiled program: it is
// decided from the column's index key (selection.exact; TestExactFilterIsCEL holds it to
// CEL's own evaluation). Per target a selection costs its compiled program (none for such
// a filter) and, while it recovers, recSeen: nothing per row it holds.
//
// # Guarantees
//
// The delivery guarantees of docs/architecture.md: a target receives indexes in strictly
// increasing order (ordered), never an index twice across reconnects and player restarts
// (unique), every record of its views once faults stop, or a snapshot that includes its
// effect (reliable), and, resuming from i, exactly the records after i (resumable). The
// player holds no durable state: any player can serve any target, which resumes from the
// index it sends. A slow target never slows the others and holds at most
// Config.TargetBudgetBytes: past it, it is caught up again from the log instead of
// buffered, without being disconnected.
//
// # Configuration
//
// Config lists the streams, the Kafka connection (kafkaconn.Config: TLS, SASL) and how
// gRPC is secured (TLS or Insecure); every other field has a documented default: batch
// bounds, the per-target byte budget, the ack time-out, the progress interval, the
// tombstone horizon (read from the topic unless set), the in-memory history for
// recoveries, the shutdown grace, how long Run waits for Kafka at start-up.
//
// # Internals
//
// The rest of this comment is for the package's maintainers: how the paper's algorithms
// map to the files, what the player adds, and the goroutines and locks.
//
// The files outside the algorithms: player.go (Player: New, Run, Serve, WaitReady, Close,
// the HTTP handlers), config.go (Config, StreamConfig, Keepalive, the defaults,
// LoadConfig, Validate), security.go (TLSConfig, TokensConfig, AdminConfig, Principal and
// the interceptors that authenticate every call, end the streams of a revoked token and
// answer a failed authentication), conns.go (the listener that bounds connections before
// and after they authenticate), limits.go (the per-principal bounds on targets and Kafka
// recoveries), access.go (Grant: Config.Access and the authorization of a Hello),
// grant.go (a position entry's stale list cut to the views a target may see),
// selection.go (selections: filters compiled at the Hello, shards, and choose, the one
// filter of every path), filterindex.go (viewIndex: the dispatcher's index of a view's
// selections by equality value or shard), tlswrite.go (TLS credentials that write a
// flush's TLS records with one system call), entry.go (item, what a queue holds: an entry
// marshalled once or a frame;
// the batch and progress encodings; the poison records no target is sent), errors.go (the
// sentinels and StatusTable, their gRPC codes), check.go (Check: player -check),
// status.go (Status and the status page), state.go (a stream's states and the causes they
// follow from, Readiness and gRPC health), startup.go (Run's wait for Kafka:
// StartupTimeout), metrics.go (the Prometheus metrics, per stream and per service, the
// service labels bounded by Config.MaxServiceLabels).
//
// Algorithm 1 (target queue: push/front/pop/suspend/fetchingCompleted) is queue.go: a
// normal and a catch-up FIFO, the states N, RF, FC, S (State), and a term checked on every
// push; suspend clears both queues; fetchingCompleted moves RF to N (catch-up empty) or FC;
// pop moves FC to N when the catch-up queue drains. Pure data, changed only through its
// methods, guarded by its target's mutex.
//
// Algorithm 2 (batching, the popped map) is queue.nextBatch/ack: batches bounded by entry
// count and bytes, counted without popping (queue.at) so that a full batch can end after
// its last position entry when a source transaction's entries follow (queue.cutTxn); a
// sent batch stays accounted in popped until an ack covers its last index
// (a snapshot's batches are not tracked: queue.untrackLast). Frames (SnapshotBegin/End,
// ResyncRequired) travel through the same queue, alone.
//
// Algorithm 3 (dispatcher) is stream.apply (apply.go), called by the main fetcher goroutine
// (stream.fetch, stream.go, with the rest of a stream's life: attach, run, topic checks)
// for every record: it updates the materialized copy and pushes the entry to the targets
// subscribed to its view (header sc-view), or to every target for a position record, with
// target.pushMain (dispatch.go), skipping
// targets whose last ack is >= the entry's index, then publishes current_index
// (stream.current). The entry is marshalled once, as its own one-entry batch frame
// (item.single, whose tail is the Entry bytes item.wire): a one-entry batch goes to every
// target as those very bytes, a longer batch is a small header followed by the tails of
// the entries' frames, handed to gRPC as parts (batchParts, rawParts in codec.go): no entry
// is re-encoded or copied by the player.
//
// SubscribeMany (many.go) serves targets that are channels of one stream: each is opened
// by service.open and admitted like a Subscribe stream's, its sender writes through its
// channel (manyChan.SendMsg: a header of the channel before the same shared frame bytes,
// under the stream's send lock), the stream's one reader routes acks to it
// (target.onRequest), and its end reaches the stream through target.whenEnded, which
// queues its ChannelEnd for the stream's writer of ends. Per stream: the handler, the
// reader, the writer of ends and, while Hellos wait, an admitter; per channel, none.
//
// Algorithm 4 (completion-queue thread) is replaced by goroutines per target (target.go,
// which holds a target's life from serve to suspend): a sender (target.drain, sendReady)
// does sendNext — one write at a time, which is what write_status ensured — and the
// receiver (target.receive) handles read completions: acks update last_ack and release
// popped batches. No goroutine waits for a target's work: target.signal starts a sender
// when none runs, and it ends when nothing is left to send or the send window is full, so
// an idle target costs its handler and its receiver only. The sender also sends progress
// messages (the paper's dummy entries) once when the target has caught up, then to targets
// in N with nothing to send for Config.ProgressInterval (signalled by the stream's progress
// loop, which also checks every target's health: ack time-outs and sends blocked on a
// client that does not read suspend it). Every message the sender writes ends with
// head_index, the main position (withHead: one small extra part, the shared entry bytes
// untouched). The Subscribe handler goroutine (server.go, target.serve) waits for the
// target's end, the stream's or the player's: returning from the handler cancels the
// stream, which unblocks a write stuck on a stalled client.
//
// Algorithm 5 (recovery). Player restart: the player keeps no state; the main fetcher
// starts at the head of the log (after reading the log from its start into the
// materialized copy) and every target resumes from the index it sends in Hello. Target
// recovery (admit.go, stream.admit): under the stream lock the target is registered in RF
// with a new term and the main position ci is read, so main entries > ci go to its normal
// queue; a recovery fetcher (recovery.go, target.recoveryFetcher) reads [resume+1, ci] into
// the catch-up queue and calls fetchingCompleted (target.complete). It reads from a list of
// sources (the source interface; sources.go), each from where the previous one has
// nothing: the stream's in-memory history of recent records (historySource over history.go,
// bounded by Config.HistoryBytes: one decoded item shared by every recovering target), then
// Kafka (kafkaSource, its own sarama consumer). Caught-up is "saw an offset >= ci", never
// index+1 counting: indexes have gaps. A Kafka recovery that finds the log start moved past
// its position resyncs the target on the same stream (target.resync, admit.go: new term,
// queues cleared, ResyncRequired + snapshot as of the main position), as admission would
// on reconnect. A target without resume index gets a snapshot bootstrap instead: its
// recovery fetcher's first source is snapshotSource (SnapshotBegin X, rows of its views in
// index order from the materialized copy with the latest position record at its place,
// SnapshotEnd X, X = ci; stream.snapshotItems). One whose resume index
// is below the log start, at/after the log end, or followed by records older than the
// tombstone horizon (the topic's delete.retention.ms, read from the broker; the append
// time of the first record after the resume index is bounded from a timeline sampled every
// second of log time, stream.firstAfterTime) gets ResyncRequired then the snapshot.
//
// The materialized copy (stream.rows: view -> rowStore, rowstore.go, and stream.position:
// the latest position record) holds no pointer per row, so that the collector does not
// trace millions of rows (which stalled dispatch for hundreds of milliseconds per
// collection): each view appends its rows, as records of bytes (header, key, the row's
// one-entry frame), to an arena of byte chunks, and finds a key's live record through a
// map of key hash to location (a map of integers; colliding keys in a second map by key).
// The main fetcher applies records in increasing index order, so the arena is also the
// index order: an update or tombstone clears the previous record's live flag, and when a
// view's dead bytes pass half its live ones its live records are moved, in order, to a new
// arena a few kilobytes per applied record (the move chases the appends at the old
// arena's tail), so no apply pays for a whole view. At admission, under stream.mu,
// stream.snapshotRows walks the arenas of the target's views from the log start and
// merges them by index (snaprows.go): the state at X in index order as 16-byte references
// that keep their chunks alive; the snapshot source makes each row an item, sharing the
// record's bytes, as it pushes it. O(rows) without a sort, an allocation per row under
// the lock, or a look at a row's value.
//
// Byte budget (not in the paper): a target's normal queue may hold Config.TargetBudgetBytes/2;
// past it the queue is dropped and the target continues in RF without being disconnected
// (target.pushMain: in N or FC a recovery fetcher starts for the dropped range; in RF the
// running fetcher's range is extended by fetchingCompleted). Recovery sources block while
// the catch-up queue holds TargetBudgetBytes/4, and the send window (unacked batches) is
// TargetBudgetBytes/4, so one target holds at most its budget however slow it is.
//
// A stream's life (stream.run): attach checks its topic, the main fetcher (stream.fetch)
// loads and follows it; when either fails, stream.fail drops the copy and the history,
// ends the targets and refuses Hellos until the next attempt (retryDelay), which reads the
// topic from its start. Its Kafka clients live as long as the Player, so that no target
// holds a client that a restart closed.
//
// Goroutines and locks. Per stream: one main fetcher (stream.run), one progress loop
// (stream.progressLoop: one ticker that checks the targets' health and starts the senders
// owing a progress message) and three Kafka clients (connections): the main fetcher's, the
// recovery fetchers', and one for the offset look-ups of admissions (behind the main
// fetcher's long-poll fetches they would wait for its MaxWaitTime). Per target: the
// Subscribe handler (parked until the target ends), the receiver, a sender while there is
// something to send (target.signal starts it; at most one runs), and at most one recovery
// fetcher at a time (per term). A Hello's filters compile on a goroutine of their own
// (onOwnStack). Per Player:
// the gRPC and HTTP servers, and the watcher that reads the TLS and token files again when
// they change (daemon.Watch). Lock order: Player.stateMu, then stream.mu, then target.mu.
// Every goroutine is tracked by the Player's WaitGroup or the gRPC server; Close waits.
package player
