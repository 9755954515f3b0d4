// Package cacheclient is the in-memory cache that services embed: it subscribes to a
// statecast player (gRPC, schemas/proto/statecast/v1), keeps typed views of a stream in
// memory behind custom secondary indexes, runs change handlers, and can persist its state
// to resume quickly after a restart. It depends on gRPC and protobuf only (never on a Kafka
// or PostgreSQL client; a test checks the dependency list). Prometheus metrics live in the
// subpackage cacheprom.
//
// # Types
//
//   - [Client]: one subscription to one stream, created by [New] with a [Config] and
//     [Option]s ([WithLogger], [WithHooks], [WithDialOptions]).
//   - [View]: a typed view, registered with [Register] and a [Decoder] that turns a row's JSON
//     into the service's own (light) type. Reads: Get, Range, Len, Index, Snapshot.
//   - Secondary indexes: [View.AddIndex] with an [IndexFunc] returning zero, one or many
//     values per object; [View.ByIndex], [View.ByIndexKeys], [View.IndexValues]. They are
//     maintained from the old and the new object on every change; empty sets are removed.
//     Results share the objects the view holds: treat them as read-only.
//   - Change handlers: [OnChange] with a func receiving a [Change] (Key, Op, Old, New, Index).
//
// # Goroutines
//
//   - The connection goroutine (one per client) holds one Subscribe stream to one player at
//     a time. It receives frames, checks their order, applies batches, publishes the new
//     versions of the views, acknowledges, and hands the changes to the handlers. On any
//     error it fails over to the next player address with jittered exponential backoff and
//     resumes from its applied index.
//   - Handler goroutines run the OnChange functions (see "Change handlers").
//   - With StateDir, a load goroutine reads the state file at Start (see "Persistence"),
//     and a persistence goroutine writes it every PersistInterval; Close writes a last one.
//   - Readers (the service's goroutines) never block: they only load published versions.
//
// # How readers never see a half-applied batch, and what it costs
//
// Each view is a persistent (immutable) hash trie (CHAMP layout, 32-way nodes; see trie.go)
// plus one persistent trie per secondary index, bundled with the count and the stream index
// into one version struct behind one atomic pointer. The connection goroutine applies a
// whole batch to a private version — copying only the trie paths it touches, and mutating
// in place the nodes it already copied in this batch — and then publishes it with one
// atomic store. A reader loads the pointer once per call, so Get, Range, Len, ByIndex and
// IndexValues each see one whole batch or none of it; [View.Snapshot] gives several reads
// the same version. Costs: a Get is a lock-free walk of a few nodes (about sync.Map's cost,
// see docs/BENCHMARKS.md); a write allocates a copy of each node on its path
// once per batch (a few hundred bytes of garbage per change; large batches amortise it);
// a snapshot (bootstrap, resync or state file) is collected raw (key, value, index per
// row), then hashed and decoded in chunks on every core, sorted in trie order (small
// (order, position) pairs) and built bottom-up in one pass straight from the collected rows
// beside the live version, so memory peaks at two versions plus the snapshot's raw rows. The decoder is
// most of a cold start's CPU: a service should use a fast one (the example and the
// benchmarks use github.com/goccy/go-json, 4–5× encoding/json).
// Views are published one after the other: a reader that reads two views may see one of
// them one batch ahead of the other.
//
// # Decoding frames
//
// The client decodes the player's SubscribeResponse frames with its own protowire decoder
// (frame.go; a gRPC codec forced on the Subscribe call, the server is unchanged): each
// message is copied once out of gRPC's buffers into a buffer of its own, and its entries'
// keys and values are sub-slices of it (view names are interned), so receiving a row
// allocates nothing per row. FuzzDecodeFrame checks it against proto.Unmarshal into the
// generated types.
//
// # Order checks and resync
//
// The client keeps its applied index and checks every frame like an ordered consumer: batch
// indexes must be strictly increasing and above the applied index, snapshot frames must be
// well nested, keys must belong to a subscribed view. Any anomaly drops the stream and
// resubscribes from the applied index (a batch is checked whole before any of it is
// applied). ResyncRequired is followed by a snapshot that replaces the views' state
// atomically at SnapshotEnd (keys absent from it are removed, with OpDelete changes). At an
// epoch-end record the client compares the view's row count and epoch hash (including rows
// its decoder refused) with the record's; a mismatch is logged, counted and repaired by
// resubscribing without a resume index (a fresh snapshot replaces the state).
//
// # Change handlers
//
// Changes are handed to the handlers after their batch is published (a handler's Get sees
// the change or something newer). Each handler runs on its own engine of package parallel
// (WithConcurrency goroutines, default 16): by default the changes of one key run one at a
// time in index order and different keys in parallel ([WithOrdering] selects the engine's
// other orderings). A handler error is retried with backoff ([WithRetry]) while only that
// key waits, then reported to Hooks.OnHandlerError and skipped. The handler queue is
// bounded: a handler slower than the stream eventually slows batch application. Close
// waits for the handler calls in flight; queued changes are dropped.
//
// # Readiness
//
// [Client.WaitReady] returns once every view's initial state is complete: after the first
// snapshot is applied (SnapshotEnd), or — when the client resumed from a state file — at the
// first Progress frame (the player sends one when the target is caught up and idle) or when
// no frame arrived for Config.ReadyIdle. With [WithInitialPass] it also waits for that
// handler to have handled the changes that built the initial state.
//
// # Metrics
//
// [Client.Stats] returns counters and gauges (applied index, entries applied, resyncs,
// reconnects, epoch checks and mismatches, decode and handler errors, staleness = now −
// source time of the last applied entry, lag = source time to publication of the last
// batch, per-view length, index and memory estimate). [Hooks] report events as they happen.
// cacheprom.NewCollector exports Stats to Prometheus on each scrape. LagEntries is the
// player's head (head_index, carried by every frame; Stats.Head) minus the applied index.
//
// # Persistence
//
// With Config.StateDir, the raw value of every row is kept beside its object, and the state
// (stream, applied index, every view's keys and raw values, xxhash64 checksum) is written
// atomically (temp file, fsync, rename). At Start the load goroutine reads the file and
// verifies all of it (checksum, stream, format, structure, every registered view present);
// any problem is reported and the file ignored as a whole: the client bootstraps from a
// snapshot. A verified file's index is handed to the connection goroutine, which
// subscribes with it at once, while the load goroutine parses, hashes and decodes the rows
// (chunks of rows on every core, from offsets noted while verifying) and builds the views
// under the apply lock (keys and raw values alias the file's buffer,
// no copy per row: the buffer stays in memory until every row loaded from it has been
// replaced). The connection goroutine handles no frame before the load is over, and the
// ReadyIdle wait of a resume counts from the subscription but ends no earlier than the
// load: connecting and the first frames' wait overlap the load instead of following it.
//
// # Concurrency rules
//
//   - Register, AddIndex and OnChange must be called before Start; they fail afterwards.
//   - View reads, Stats, Index, Ready and WaitReady are safe from any goroutine at any time.
//   - Decoders and index functions must be pure and must not call the client. Index
//     functions and the decoding of live rows run on the connection goroutine; the rows of a
//     snapshot or state file are decoded on GOMAXPROCS goroutines at once.
//   - Hooks run on the connection goroutine, except OnHandlerError (a handler goroutine),
//     OnPersist (the persistence goroutine, or Close) and the OnResync of an unusable state
//     file (the load goroutine). They must be fast.
//   - The persistence goroutine takes the connection goroutine's apply lock only to load the
//     views' current versions (a consistent cut); it writes the file without it.
package cacheclient
