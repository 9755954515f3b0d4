// Package cacheclient is the in-memory cache that services embed: it subscribes to a
// statecast player, keeps typed views of a stream in memory behind the service's own
// secondary indexes, runs change handlers, and can persist its state to restart quickly.
// It depends on gRPC and protobuf only (never on a Kafka or PostgreSQL client; a test
// checks the dependency list). Prometheus metrics live in the subpackage cacheprom, the
// status page in cachestatus.
//
// # Use
//
//  1. [New] with a [Config] (player addresses, stream, service name; the rest has documented
//     defaults) and options ([WithLogger], [WithHooks], [WithDialOptions]).
//  2. [Register] each view with a [Decoder] that turns a row's JSON into the service's own
//     type, decoding only the fields it needs.
//  3. Optionally [View.AddIndex] secondary indexes and [OnChange] handlers.
//  4. [Client.Start] (or [Client.Run]), then [Client.WaitReady] before serving reads;
//     [Client.Close] at the end.
//
// # Identity and security
//
// [Config].Service names the service (every replica uses the same); [Config].InstanceID
// names the process and is generated unless set ([DefaultInstanceID]: hostname, pid, a
// random suffix). The player knows a connection by its principal and instance id: only a
// reconnect of the same instance replaces it, so replicas never evict each other, and its
// metrics are labelled by service.
//
// [Config].TLS secures the connection ([TLSFiles] builds one from PEM files, with a client
// certificate for mutual TLS read again at each connection); [Config].Token sends a bearer
// token with each subscription ([StaticToken], [TokenFile], or a function of your own for
// tokens that rotate), over TLS only. See docs/security.md.
//
// # Errors of the connection
//
// Why a subscription ended is a [*SubscribeError]: the player's address and gRPC code,
// its message (which names the view, the stream or the grant) and a kind to match with
// errors.Is. A refusal that cannot heal while the client keeps its config stops the
// client at once: a misspelt or unpublished view ([ErrUnknownView]; declare a view that
// services subscribe to before its first record in the player's stream config), a missing
// grant ([ErrPermissionDenied]), a request the player finds invalid ([ErrBadHello]), and a
// stream that every address refused in turn ([ErrUnknownStream]; one refusal sends the
// client to the next address, since a rollout may add the stream to one player before
// another). WaitReady, WaitFor and Run then return it (errors.Is [ErrStopped] too), as
// does [Client.Err]; [Stats].Stopped says so, and the client stays stopped until Close.
// A service that cannot serve without its views should exit with that error: restarted
// with the same config, it is refused again. Everything else is retried with backoff,
// on the next address: a player that cannot be reached or cannot serve now
// ([ErrUnavailable]), credentials that a rotation may fix ([ErrUnauthenticated]), a
// player older than the client ([ErrIncompatible]). A WaitReady or WaitFor whose ctx ends
// meanwhile returns a [*WaitError] that matches ctx's error and names the last of them:
//
//	if err := client.WaitReady(ctx); err != nil {
//		log.Fatal(err) // cacheclient: WaitReady: context deadline exceeded; the last error: cacheclient: player 10.0.0.7:7070: Unavailable: …
//	}
//
// Each is also logged (a refusal at Error level) and reported to [Hooks].OnDisconnect.
//
// # Keys
//
// A row is stored under its key text: its record key without the view prefix, each key
// column escaped ("\" as "\\", "|" as "\|") and the columns joined by "|" (the record key
// format of schemas/README.md). [Key] builds it from the columns' texts and [SplitKey]
// takes it apart. A one-column key is escaped too: a sport "a|b:c d" is found by
// Get(Key("a|b:c d")), not by Get("a|b:c d"); a column text without "|" or "\" is its own
// key text. Get, Range, ByIndexKeys, [Change].Key and decoders all use key texts.
//
// # Reads
//
// [View.Get], [View.Range], [View.Len] and [View.Position] read the view's last published
// version; [View.Version] returns one version for several reads that must agree. Reads
// never block and never wait for the connection. Objects are shared with the view: treat
// them as read-only.
//
// The client publishes all its views at once: a batch of the stream, a snapshot, and a
// source transaction (the records of one PostgreSQL transaction, which may span several
// batches; see Guarantees) is visible in every view or in none. [Client.Read] returns
// that publication, a [Cut], and [View.In] a view's version in it: reads of several views
// that must agree go through one Cut.
//
//	cut := client.Read()
//	ev, ok := events.In(cut).Get(id)
//	ms := markets.In(cut).ByIndex("event", id)
//
// A single view's reads (Get, Version, …) are atomic within the view and cost one atomic
// load, as before; two of them on two views may see two publications, one of them a
// source transaction further than the other.
//
// A view's stream position ([View.Position], [Client.Position], [Change].Position,
// [Stats].Position) is the position in the stream of what it reflects: the index of a
// record in the stream (its Kafka offset). Positions increase but are not dense (never
// assume position+1 exists). Position -1 means nothing applied yet.
//
// # Read-your-writes
//
// A stream captured from PostgreSQL's WAL carries the source position (an [LSN]): the
// client's applied source position ([Stats].SourcePosition, [Cut.SourcePosition]) is the
// position of the last position record it published, and every view reflects every
// commit up to it. [Client.WaitFor] waits until it reaches a position, so a service that
// has just written answers from its cache with its own write:
//
//	tx.Commit(ctx)
//	var lsn string
//	conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn) // same connection, after COMMIT
//	pos, _ := cacheclient.ParseLSN(lsn)
//	if err := client.WaitFor(ctx, pos); err != nil { … } // then read the cache
//
// pg_current_wal_insert_lsn() after the COMMIT returned is always at or past the commit
// record's end: the commit record was inserted into the WAL before COMMIT returned, and
// the insert position only grows. pg_current_wal_lsn() (the write position) is not: with
// synchronous_commit off, COMMIT returns before its WAL is written, and that position can
// still be behind the commit, so a wait for it could return before the write is
// reflected. The insert position may be a little ahead of the commit (other sessions'
// WAL): WaitFor then waits for them too, which costs at most the time until the next
// position record (the distributor writes one at a bounded interval on an idle stream,
// and has the server flush WAL it left unflushed, which the slot would not be sent).
// A position taken on another connection, or before the COMMIT, proves nothing.
//
// WaitFor fails with a [*StaleViewError] (errors.Is [ErrStaleView]) when the position
// record that reaches the position says one of the client's views does not follow it (the
// distributor stopped that view on a bad row), and with [ErrNoSourcePosition] when the
// stream has no source position (views captured by polling). Waiters cost nothing while
// they wait: each publication wakes all of them at once.
//
// # Secondary indexes
//
// [View.AddIndex] registers an [IndexFunc] that returns zero, one or many values per
// object; [View.ByIndex], [View.ByIndexKeys] and [View.IndexValues] read them (and the
// same methods of [Version]), ByIndex and ByIndexKeys in the order of the key texts,
// IndexValues in the order of the values (Range, a walk of the trie, has no order). Indexes are maintained from the old and the new object on
// every change and updated with the batch that changes them; values without objects are
// removed.
//
// # Change handlers
//
// [OnChange] registers a function that receives every [Change] (Key, Op, Old, New,
// Position) of a view after the batch that holds it is published: a handler's Get sees
// the change or something newer. By default the changes of one key run one at a time in
// stream order and different keys in parallel ([WithConcurrency] goroutines, default 16;
// [WithOrdering] selects other orderings). An error is retried with backoff ([WithRetry])
// while only that key waits, then reported to [Hooks].OnHandlerError as a [HandlerError]
// and skipped. The queue is bounded: a handler slower than the stream eventually slows
// the application of batches. Close waits for the calls in flight; queued changes are
// dropped.
//
// Across a restart with Config.StateDir the state file holds the last publication whose
// changes every handler completed (handled, or skipped after its attempts), not the last
// one applied. The restart hands that state to the handlers as creates (OpCreate, Old
// empty), then the changes after it, so a change queued at Close is delivered again:
// delivery is at least once. What a handler can still miss:
//   - without StateDir, every restart starts from a snapshot: keys deleted while the
//     process was down produce no change, and everything else arrives as a create;
//   - a resync (a snapshot after the resume position was compacted away, a failed epoch
//     check, a new stream target) hands over only the difference between the state
//     before and the snapshot: the intermediate changes of a key, and keys created and
//     deleted in between, are not seen. [Hooks].OnResync reports it; a handler that must
//     see every change treats it as its signal to reconcile;
//   - a change whose handler failed every attempt ([Hooks].OnHandlerError) counts as
//     complete and is not delivered again.
//
// # Selections
//
// A view may hold part of its rows: Register with [WithFilter] (a CEL expression over the
// view's columns, evaluated by the player), [WithShard] (shard i of n by a stable hash of
// the key) and [WithColumns] (only these columns of each row: the decoder sees, and the
// view stores, only them), see [Selection]. The player sends only those rows: a row that starts
// passing arrives as a create, one that stops passing as a delete, in the source
// transaction that moved it. Reads, indexes, change handlers, WaitReady and WaitFor work
// on the subset; a selected view's epoch-end (which counts the whole view) is not checked.
// [View.Reselect] changes the selection at run time: the client subscribes again without
// a resume index and the snapshot replaces every view atomically. A filter the player
// refuses (a column the view does not have) stops the client with ErrBadHello, its
// message naming the view and the column. A Hello with selections needs protocol version
// 2: a player that predates it refuses the client (ErrIncompatible) rather than ignore
// them; without selections the client says version 1, which every player serves. The
// state file records each view's selection and is resumed from only with the same one.
//
// # Many Clients in one process
//
// A process that holds many subscriptions at once (a gateway with a filtered Client per
// connected user) gives them one [Many] ([WithMany]): they then share one connection and
// one SubscribeMany stream per player, each Client a channel of it, and the player keeps
// no goroutine and no gRPC stream per Client (about 1.5 KiB per filtered target instead
// of about 18 KiB). Each Client keeps everything else its own (views, selections,
// readiness, failover, state directory); one Client's end ends its channel only. The
// Clients of one Many should have the same security settings (its connections are dialled
// with the first Client's), and read at the same pace (they share the stream's flow
// control). A player that predates SubscribeMany answers Unimplemented, which ends the
// subscription like any other error (the Clients retry): use Many with players that serve
// it.
//
// # Guarantees
//
//   - Ordered, no duplicates: the client applies the stream's records in order, each once,
//     across reconnects and failover between players; it checks the order of every frame
//     and resubscribes from its applied position on any anomaly ([ErrOrder]).
//   - Atomic: readers never see part of a batch, of a snapshot or of a source transaction
//     (the records since the previous position record, marked sc-txn; schemas/README.md),
//     within a view or, through a Cut, across views. A transaction is applied when its
//     position record arrives, however many batches carry it; one open at a snapshot's
//     index is applied, with the snapshot, at the next position record (WaitReady waits
//     for it); compaction may merge transactions (it keeps one position record): a replay
//     applies them together, never partially.
//   - Read-your-writes: after WaitFor(ctx, P) returns nil, every view reflects every
//     commit up to P.
//   - Verified: at each epoch-end record the client compares a view's row count and hash
//     with the distributor's; a mismatch is logged, counted ([ErrEpochMismatch]) and
//     repaired by a fresh snapshot.
//   - Failover: a client has several player addresses and fails over from one to the next
//     with jittered exponential backoff, resuming from its position.
//
// # Readiness
//
// [Client.WaitReady] returns once every view's initial state is complete: after the
// first snapshot is applied, or — when the client resumed from a state file — once it has
// caught up with the player: its applied position reached the player's head_index in the
// first frame of the stream (the player's main position when it subscribed), or the
// player said so with a Progress frame. A recovery that is slow (nothing received for a
// while) is not caught up; only a player that sends no head_index leaves the client to
// Config.ReadyIdle without frames. With [WithInitialPass] it also waits for that handler
// to have handled the changes that built the initial state.
//
// # Persistence
//
// With Config.StateDir, the client writes its state (views, position and the Kafka topic
// ID the position is an offset of) every PersistInterval and at Close, atomically, with a
// checksum, or with Config.StateKey an HMAC-SHA256 under the key. At Start it loads a
// valid file and resumes from its position instead of loading a snapshot; a file that
// fails any check is reported ([ErrStateFile]; under a key, a file the key does not
// authenticate: [ErrStateAuth]) and ignored as a whole. The checksum finds corruption,
// not forgery: without a key, whoever can write StateDir decides what the client loads
// (docs/security.md, "cacheclient's state directory"). A player whose topic has another ID (deleted and created again since) answers
// the resume with a resync and a snapshot. The raw value of every row is then kept in
// memory beside its object.
//
// # Metrics
//
// [Client.Stats] returns counters and gauges: applied position and source position,
// entries applied, resyncs, reconnects, epoch checks and mismatches, decode and handler
// errors, staleness (now − source time of the last applied entry), lag (source time to
// publication of the last batch), LagEntries (the player's head minus the applied
// position) and per view its length, position, memory estimate and decode failures.
//
// A row the view's decoder refuses is kept out of the view (Get does not find it) until a
// later version of it decodes. That is never silent: it is logged at Error level with the
// view, the key and the error, counted per view with the most recent keys
// ([ViewStats].DecodeErrors, DecodeFailedKeys, HiddenRows) and reported to
// [Hooks].OnDecodeError. [Hooks] report events as they happen.
//
// A panic in the service's code is recovered, never a crash of the service: a decoder or
// an index function that panics on a row refuses the row exactly as above (its error is a
// [*PanicError], errors.Is [ErrPanic], with the panic's value and stack); a change
// handler that panics has failed that attempt (retried, then [Hooks].OnHandlerError).
// Every recovered panic is counted ([Stats].Panics) and logged (the first ones with their
// stack).
//
// cacheprom.NewCollector exports Stats to Prometheus on each scrape.
//
// # Concurrency rules
//
//   - Register, AddIndex and OnChange must be called before Start; they fail afterwards.
//   - View, Version and Cut reads, Read, Stats, Position, Ready, WaitReady and WaitFor are
//     safe from any goroutine at any time.
//   - Decoders and index functions must be pure and must not call the client (an index
//     function's values for an object are computed again when the object is replaced:
//     one that panics then leaves the old values indexed). Index functions and the
//     decoding of live rows run on the connection goroutine; the rows of a snapshot or
//     state file are decoded on GOMAXPROCS goroutines at once.
//   - Hooks run on the connection goroutine, except OnHandlerError (a handler goroutine),
//     OnPersist (the persistence goroutine, or Close) and the OnResync of an unusable state
//     file (the load goroutine). They must be fast and must not call back into the client
//     except for its read-only methods.
//
// # Internals
//
// The rest of this comment is for maintainers.
//
// Files. The API: client.go (Client: New, Register, Start, Run, Close, WaitReady),
// config.go (Config and its defaults, Validate, the options, Hooks), credentials.go
// (TLSFiles, the token sources, DefaultInstanceID), view.go (View and Version: Get, Range,
// the secondary indexes; Decoder, IndexFunc), read.go (Cut, Read, View.In, and the
// publication), source.go (LSN, ParseLSN, WaitFor), handlers.go (OnChange and its
// options), select.go (Selection, WithFilter, WithShard, Reselect, the Hello's
// selections; WithColumns), keys.go (Key, SplitKey), errors.go (the sentinels and the error types, and how a
// gRPC status becomes a SubscribeError),
// stats.go (Stats, ViewStats), info.go (Info, Done), panic.go (PanicError; the decoders
// and index functions run under recover, as dispatch.go runs handlers). The machinery: conn.go (the
// connection goroutine: dialling, failover, one Subscribe session), many.go (Many: the
// shared connections and SubscribeMany streams, a session's channel of one, the decoder
// of their messages), frame.go (the frames' decoder), receive.go (the order checks and what each frame does), apply.go (entries
// applied to the working versions, the changes, the epoch accounting), snapshot.go (a
// snapshot staged and built beside the live version), trie.go (the persistent hash trie),
// dispatch.go (a handler's changes on a parallel.Engine), handled.go (the newest Cut whose
// changes every handler completed), persist.go (the state file: written, verified,
// loaded).
//
// Goroutines. The connection goroutine (one per client) holds one Subscribe stream (or,
// WithMany, one channel of the Many's stream, whose one reader goroutine per connection
// routes each channel's frames to its session) to one player at a time: it receives frames, checks their order, applies batches, publishes
// the views' new versions, acknowledges, and hands the changes to the handlers' engines
// (package parallel). With StateDir, a load goroutine reads the state file at Start and a
// persistence goroutine writes it; readers only load published versions.
//
// Versions. Each view is a persistent (immutable) hash trie (CHAMP layout, 32-way nodes;
// see trie.go) plus one persistent trie per secondary index, bundled with the count, the
// stream position, the epoch accounting and the rows the decoder refused into one version
// struct behind one atomic pointer. The connection goroutine applies entries to a private
// working version — copying only the trie paths it touches, and mutating in place the
// nodes it already copied since the last publication — and publishes it with one atomic
// store; a reader loads the pointer once per call. A Get is a lock-free walk of a few
// nodes; a write allocates a copy of each node on its path once per publication (a few
// hundred bytes of garbage per change; large batches amortise it).
//
// Publication (read.go, Client.publish). Every view's working version is published at
// once, under the apply lock: each view's own pointer is stored, then one Cut holding all
// of them (and the applied stream and source positions) is stored in the client's
// pointer, then the applied position; the Cut that was replaced closes its channel, which
// is what WaitFor's waiters sleep on. A batch is published up to its last entry after
// which no source transaction is open: a txn entry opens one, a position entry ends it,
// and while one is open the working versions keep everything applied since the last
// publication, across batches (at most one publication per batch: the working version
// cannot be published "as of" an earlier entry). Changes for the handlers are collected
// with the working version and handed over only once published. When the stream ends,
// the working versions are dropped (rollback), so a transaction cut by a disconnect was
// never visible; the reconnect resumes from the published position and receives it again.
//
// Acks inside a transaction. The client acknowledges every batch it applied, published or
// only staged: the player's send window (unacknowledged bytes) waits for acks, so a client
// that acked only at a transaction's end would stall forever on a transaction larger than
// the window. This is safe because an ack is not the resume point: the player keeps no
// state across connections and a reconnect resumes from the index in its Hello, which is
// the published position (what the state file also holds). An ack only releases the
// player's memory of sent batches on this connection, and within a connection the entries
// it covers were received and are kept (staged) until published or the connection ends —
// in which case they are received again. A Progress frame inside a transaction is acked
// the same way and publishes nothing.
//
// Snapshots (bootstrap, resync or state file) are not applied row by row: the rows are
// collected raw (key, value, position), then hashed and decoded in chunks on every core,
// sorted in trie order (small (order, row) pairs) and built bottom-up in one pass beside
// the live version, which they replace as the working version at SnapshotEnd (keys absent
// from the snapshot are removed, with OpDelete changes), published then — or, when the
// snapshot's rows hold txn rows after its position entry (a transaction open at its
// index), with the rest of that transaction. Memory peaks at two versions plus the
// snapshot's raw rows. The decoder is most of a cold start's CPU: a service should use a
// fast one (the example and the benchmarks use github.com/goccy/go-json).
//
// Bounds of a frame. A frame's memory is bounded by its bytes and the client's own bounds,
// never by what it claims: a Batch may hold at most Config.MaxBatchEntries entries (the
// client asks the player for that bound in Hello), a SnapshotBegin at most the client's
// views; past them the frame is refused before anything is allocated for the excess (an
// empty entry takes 2 bytes on the wire and ~150 in memory).
//
// Decoding frames. The client decodes the player's SubscribeResponse frames with its own
// protowire decoder (frame.go; a gRPC codec forced on the Subscribe call, the server is
// unchanged), with the field numbers of schemas/wire: each message is copied once out of
// gRPC's buffers into a buffer of its own, and its entries' keys and values are
// sub-slices of it (view names are interned), so receiving a row allocates nothing per
// row. FuzzDecodeFrame checks it against proto.Unmarshal into the generated types.
//
// Order checks and resync. The client keeps its applied position and checks every frame
// like an ordered consumer: batch positions must be strictly increasing and above the
// applied position (or the last staged one), snapshot frames must be well nested, keys
// must belong to a subscribed view. Any anomaly drops the stream and resubscribes from the
// applied position (a batch is checked whole before any of it is applied). ResyncRequired is followed by a snapshot.
// The epoch check counts the rows the decoder refused too (they are hidden but accounted),
// with the row hashes of schemas/record; a mismatch resubscribes without a resume
// position.
//
// State file. The file (stream, position, source position and stale views, every view's
// keys and raw values, xxhash64 checksum or, with a key, HMAC-SHA256; format 1, without the source state, is still
// read) is written to a temp file, fsynced and renamed. At Start the load goroutine
// verifies all of it (checksum or MAC, stream, format, structure, every registered view present)
// and hands the position to the connection goroutine, which subscribes with it at once,
// while the load goroutine parses, hashes and decodes the rows (chunks on every core, from
// offsets noted while verifying) and builds the views under the apply lock. Keys and raw
// values alias the file's buffer (no copy per row: the buffer stays in memory until every
// row loaded from it has been replaced). The connection goroutine handles no frame before
// the load is over (and the ReadyIdle fallback of a resume counts from the subscription
// but ends no earlier than the load): connecting overlaps the load instead of following
// it.
// The persistence goroutine writes the newest Cut whose changes every handler completed
// (the last Cut without handlers): published, immutable versions of every view, read
// without the apply lock (handled.go).
package cacheclient
