/**
 * A client of the statecast player: one stream's views held in memory, kept current over
 * gRPC, each source transaction and snapshot applied whole.
 *
 * <p>{@link io.statecast.client.StatecastClient} is the cache: built with its builder, views
 * registered ({@link io.statecast.client.View}: typed, raw or JSON trees, each with its
 * indexes and {@link io.statecast.client.ChangeListener}s, optionally a
 * {@link io.statecast.client.Selection}), then started. Its futures say when it is ready and
 * when it holds a source position ({@link io.statecast.client.Position}); what it cannot
 * recover from is a {@link io.statecast.client.StatecastException} naming the view and the
 * cause. {@link io.statecast.client.Many} lets the clients of one process share one stream
 * per player.
 */
package io.statecast.client;

// How it is built (not part of the API).
//
// Threads, all the client's own, named statecast-<stream>-<role>-<n>, joined by close():
// - receive: one scheduled executor that does everything that changes the views or the
//   subscription, in order: connecting and retrying (StatecastClient), every frame of the
//   current Session, the state file's load and build, cuts for the state file. Readers never
//   wait for it: they read under a StampedLock, written only while a publication is applied.
// - net: Netty's event loop for the client's channels (a Many has its own).
// - offload: gRPC's blocking work (name resolution), kept off the receive thread.
// - listener: the listener pool (or the service's executor); KeyedExecutor runs each key's
//   changes in order on it.
// - persist: StateStore's writer of the state file, with a state directory only.
//
// Types:
// - StatecastClient: the API, the lifecycle, the connection and its retries, the views' state
//   that sessions publish to (applied index, position, waiters, readiness).
// - Session: one subscription (a Subscribe stream or a Many's channel) from Hello to end:
//   snapshots, transactions, acks, publications.
// - Frames: the raw-bytes marshaller, and a snapshot batch's entries read in place;
//   SnapshotRows keeps a snapshot's rows as bytes until its end, RowBatch holds them decoded,
//   View.build fills each map at once in its slot order.
// - View: the values (ConcurrentHashMap), indexes and listeners of one view; HashTable its
//   row hashes (and raw values for the state file), XxHash64 the row hash.
// - StateFile (the format) and StateStore (verify, load, write in the background).
// - TokenCredentials, Keys, Threads: small helpers.
