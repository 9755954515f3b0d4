// Package capture reads a PostgreSQL database's changes from a logical replication slot
// (the built-in pgoutput plugin, through github.com/jackc/pglogrepl) and gives the
// distributor what it needs to turn them into view rows: which base tables a view reads and
// how a change of each maps to the view's keys, the committed transactions in commit order,
// and database snapshots that correspond EXACTLY to a prefix of that order.
//
// # Types
//
//   - [Analyze] asks PostgreSQL which base tables a view's SQL reads (the dependencies of a
//     temporary view built from it, never a parse of the SQL in Go), each table's replica
//     identity, and how each place a table appears in the query reaches the view's rows:
//     derived from the query tree the server stores for the view and for every database
//     view it reads (read with package pgtree): equalities, hops through joined tables,
//     correlated sublinks, grouping, window partitions, DISTINCT ON, set operations. The
//     result, a [ViewDeps], gives per table a [Mapping] per occurrence — the output columns
//     that hold the changed row's values, and the [Hop]s that turn its values into theirs
//     — or why its changes force a full re-read of the view.
//   - [CheckStatement] is the first contact of a view's SQL with the server: parsed alone
//     with the extended protocol, which refuses a second statement ([ErrStatement]) before
//     anything could run it; [Analyze] starts with it.
//   - [Lookup] re-reads the rows of a view whose output columns hold given values (a
//     changed table's identities, or the view's keys), in chunks, through the condition
//     PostgreSQL pushes down into the view's query.
//   - [EnsurePublication] and the slot's functions ([LookupSlot], [SlotInfo.Check],
//     [CreateSlot], [DropSlot], [Retained]) manage the stream's publication and logical
//     slot: created when missing, validated when present (another plugin, another
//     database, a missing table, an invalidated slot: errors that name it).
//   - [Receiver] owns the replication connection: it decodes pgoutput messages into
//     [Txn]s (the changed rows' identity values, old and new, per relation), tracks how far
//     the server has decoded (keepalives), and reports the confirmed position back. It
//     copies nothing of a row change but its captured values, and none longer than
//     MaxValueBytes (Change.Oversize). Each
//     stream that reads the slot has a [Sub] of its own: the transactions that touch its
//     tables, and the position it confirmed (the slot is confirmed at the lowest).
//   - [Snapshot] is a REPEATABLE READ transaction whose visibility (xmin, xmax, in-progress
//     xids) and WAL insert position were read with its first statement. With [Sub.Take]
//     it yields the transactions the snapshot reflects: every transaction it shows must be
//     received first (the receiver has decoded past the insert position), and the visible
//     ones must form a prefix of the commit order ([Split]); then the snapshot is the state
//     of the published tables right after that prefix, which makes re-reading view rows in
//     it equivalent to reading them at that commit.
//
// # Goroutines
//
// The Receiver runs one goroutine (Run) that alone reads from and writes to the replication
// connection; other goroutines talk to it through methods (its own and its Subs': Take,
// Pending, Confirm, Ping) that only touch its mutex-guarded state, and a wake (the
// socket's read deadline set to now) that interrupts a blocked read so that a ping or a
// confirmation goes out at once. Everything else in the package is called by the
// distributor's publisher loops and holds no goroutine.
//
// # Files
//
// analyze.go (Analyze and what it returns: ViewSpec, ViewDeps, Table, Column, Mapping,
// Hop), querytree.go (the stored query trees, equality operators and volatile functions
// from the catalog), derive.go (the bindings of each level of the tree: which values of a
// changed row each column holds; derive_quals.go: the edges its conditions and sublinks
// make; derive_spread.go: the bindings closed over them and restricted to its output),
// route.go (each occurrence's Mapping chosen from them),
// lookup.go (Lookup, the hops' query), lookup_plan.go (up to how many tuples a lookup
// reads them one at a time, from the planner's costs), lookup_prepared.go (the per-value
// statement prepared once per connection), batch.go (Runner, TxRunner, Batch: several
// goroutines' lookups in rounds of one pipeline; TransientError), publication.go
// (EnsurePublication), slot.go (the slot's functions, SlotInfo, ErrSlotLost), ident.go
// (slot and publication names: PostgreSQL's rules, the quoting of START_REPLICATION's
// options), statement.go (CheckStatement), receiver.go (Receiver, Txn, Change,
// OversizeValue, Identity, LSN: the slot's messages decoded into transactions), sub.go (Sub:
// a subscriber's transactions and confirmed position, the stream's progress and error), tuple.go (pgoutput's protocol 2 messages, inside a
// stream or not: the row changes parsed without a copy of their values),
// snapshot.go (Snapshot: BeginSnapshot, ImportSnapshot, Split; LockTables, ErrRewritten;
// FlushWAL, WALPositions).
package capture
