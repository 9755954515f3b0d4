package io.statecast.client;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.locks.StampedLock;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One view held in memory: its rows decoded to {@code T}, keyed by the row's key without the
 * view prefix ({@link Keys}), with secondary indexes and change listeners.
 *
 * <p>Reads are safe from any thread and never see part of a source transaction: the client
 * applies each transaction (and each snapshot) whole. Indexes and listeners are added before
 * the client starts. Values returned are shared: do not modify them.
 *
 * @param <T> the value type
 */
public final class View<T> {
  private static final Logger LOG = LoggerFactory.getLogger(View.class);

  /** A row as applied: its decoded value (null when it did not decode) and its row hash. */
  record Held<T>(T value, long hash) {}

  /**
   * A snapshot being received or loaded: its rows as they came (as bytes from the player,
   * {@link SnapshotRows}; decoded from a state file, {@link RowBatch}), then, once built
   * ({@link #build}), the values readers will see and the row hashes.
   */
  static final class Snap<T> {
    SnapshotRows received;
    RowBatch rows;
    ConcurrentHashMap<String, T> values;
    HashTable hashes;
  }

  private final StatecastClient client;
  private final String name;
  private final byte[] prefix;
  private final Decoder<T> decoder;
  private volatile Selection selection; // null: the whole view; written on the receive thread
  // What readers see: replaced whole by the first snapshot of an empty view (see replace);
  // written only by the receive thread under the client's write lock. Rows that did not
  // decode are absent here and present in hashes.
  private volatile ConcurrentHashMap<String, T> values = new ConcurrentHashMap<>();
  // The row hash of every row held, and its raw value when the client writes a state
  // file (the receive thread's only).
  private final boolean keepRaw;
  private HashTable hashes;
  private final Map<String, Function<T, Collection<String>>> indexFns = new LinkedHashMap<>();
  private final Map<String, ConcurrentHashMap<String, Set<String>>> indexes = new HashMap<>();
  private final List<ChangeListener<T>> listeners = new CopyOnWriteArrayList<>();
  private long hashSum;

  View(StatecastClient client, String name, Decoder<T> decoder, Selection selection) {
    this.client = client;
    this.name = name;
    this.prefix = (Keys.escape(name) + "|").getBytes(StandardCharsets.UTF_8);
    this.decoder = decoder;
    this.selection = selection;
    this.keepRaw = client.keepsRaw();
    this.hashes = new HashTable(keepRaw);
  }

  /** An empty snapshot of this view, to receive rows into. */
  Snap<T> newSnap() {
    Snap<T> s = new Snap<>();
    s.received = new SnapshotRows();
    return s;
  }

  /** An empty snapshot of this view for rows rows (a state file's). */
  Snap<T> newSnap(int rows) {
    Snap<T> s = new Snap<>();
    s.rows = new RowBatch(rows, keepRaw);
    return s;
  }

  /** The rows held as of now, raw, for the state file (the client keeps raw values). */
  HashTable.Rows stateRows() {
    return hashes.rows();
  }

  /** The view's name. */
  public String name() {
    return name;
  }

  /** The part of the view this client holds; empty when it holds all of it. */
  public Optional<Selection> selection() {
    return Optional.ofNullable(selection);
  }

  /**
   * Changes the part of the view this client holds while it runs (null: all of it): a
   * resubscription without a restart. The client ends its stream and subscribes again
   * without a resume index (a resume index holds only with the selections it was read
   * with), so every view is replaced, at once, by the snapshot that follows; until then the
   * views keep what they held, and reads, indexes and listeners see the new part from that
   * snapshot on. The future completes once that snapshot is applied — at once when the
   * selection is unchanged or the client has not started — and fails when the client stops
   * or closes first, or the player refuses the selection (the error names the view).
   */
  public CompletableFuture<Void> reselect(Selection selection) {
    return client.reselect(this, selection);
  }

  void setSelection(Selection s) {
    this.selection = s;
  }

  /**
   * Adds a secondary index: {@code fn} returns the values a row is indexed by (none: the row
   * is not in the index). Call before the client starts.
   *
   * @throws IllegalStateException when the client has started or the name is taken
   */
  public View<T> addIndex(String index, Function<T, Collection<String>> fn) {
    client.checkNotStarted("view " + name + ": index " + index);
    if (indexFns.putIfAbsent(index, fn) != null) {
      throw new IllegalStateException("view " + name + ": index " + index + " is already defined");
    }
    indexes.put(index, new ConcurrentHashMap<>());
    return this;
  }

  /** Adds a change listener; call before the client starts. */
  public View<T> addListener(ChangeListener<T> listener) {
    client.checkNotStarted("view " + name + ": listener");
    listeners.add(listener);
    return this;
  }

  /** The value held under {@code key}, or null. */
  public T get(String key) {
    StampedLock lock = client.lock();
    long stamp = lock.tryOptimisticRead();
    T v = values.get(key);
    if (lock.validate(stamp)) {
      return v;
    }
    stamp = lock.readLock();
    try {
      return values.get(key);
    } finally {
      lock.unlockRead(stamp);
    }
  }

  /** The number of rows held. */
  public int size() {
    return client.readConsistent(() -> values.size());
  }

  /** A copy of every row held, as one consistent state. */
  public Map<String, T> entries() {
    return client.readLocked(() -> {
      return new HashMap<>(values);
    });
  }

  /** The keys of the rows indexed by {@code value} in {@code index}. */
  public Set<String> keysBy(String index, String value) {
    ConcurrentHashMap<String, Set<String>> ix = indexes.get(index);
    if (ix == null) {
      throw new IllegalArgumentException("view " + name + ": no index " + index);
    }
    return client.readLocked(() -> {
      Set<String> s = ix.get(value);
      return s == null ? Set.of() : Set.copyOf(s);
    });
  }

  /** The rows indexed by {@code value} in {@code index}. */
  public List<T> by(String index, String value) {
    ConcurrentHashMap<String, Set<String>> ix = indexes.get(index);
    if (ix == null) {
      throw new IllegalArgumentException("view " + name + ": no index " + index);
    }
    return client.readLocked(() -> {
      Set<String> s = ix.get(value);
      if (s == null) {
        return List.of();
      }
      List<T> out = new ArrayList<>(s.size());
      for (String k : s) {
        T v = values.get(k);
        if (v != null) {
          out.add(v);
        }
      }
      return Collections.unmodifiableList(out);
    });
  }

  // ---- called by the client's receive thread, under its write lock ----

  /** Rows held and the epoch hash (sum of row hashes mod 2^64) of what is held. */
  long rowCount() {
    return hashes.size();
  }

  long hashSum() {
    return hashSum;
  }

  /** The row hashes held (tests). */
  HashTable hashTable() {
    return hashes;
  }

  long rowHash(String key, byte[] value) {
    byte[] k = key.getBytes(StandardCharsets.UTF_8);
    byte[] b = new byte[prefix.length + k.length + 1 + value.length];
    System.arraycopy(prefix, 0, b, 0, prefix.length);
    System.arraycopy(k, 0, b, prefix.length, k.length);
    System.arraycopy(value, 0, b, prefix.length + k.length + 1, value.length);
    return XxHash64.hash(b, 0, b.length);
  }

  Held<T> decodeRow(String key, byte[] value) {
    return new Held<>(decode(key, value), rowHash(key, value));
  }

  private T decode(String key, byte[] value) {
    return decode(key, value, 0, value.length);
  }

  private T decode(String key, byte[] buf, int off, int len) {
    try {
      return off == 0 && len == buf.length ? decoder.decode(key, buf) : decoder.decode(key, buf, off, len);
    } catch (Exception e) {
      LOG.error("view {}: row {} does not decode; it is held without a value: {}", name, key,
          e.toString());
      return null;
    }
  }

  /** Applies one row (value null: tombstone); queues its change for the listeners. */
  void apply(String key, byte[] value, List<Runnable> changes) {
    Held<T> old = held(key);
    Held<T> nu = null;
    if (value == null) {
      values.remove(key);
      hashes.remove(key);
    } else {
      nu = decodeRow(key, value);
      if (nu.value() != null) {
        values.put(key, nu.value());
      } else {
        values.remove(key);
      }
      hashes.put(key, nu.hash(), value);
    }
    account(key, old, nu, changes);
  }

  private Held<T> held(String key) {
    return hashes.contains(key) ? new Held<>(values.get(key), hashes.get(key)) : null;
  }

  /** Adds a row whose row hash is known (a state file's) to a snapshot being built. */
  void snapLoad(Snap<T> snap, String key, byte[] value, long hash) {
    snap.rows.add(key, hash, decode(key, value), value);
  }

  /**
   * Builds a snapshot's maps from its rows, sized for them, once. Before the client's write
   * lock: readers go on reading the view as it was meanwhile.
   *
   * <p>Received rows are decoded first, in the order received (their bytes read once, in
   * order). Then each map is filled in its own slot order: both maps' slot arrays are large
   * enough to be allocated in the old generation, and G1 marks a card for its refinement
   * threads at each store of a young object into them. In arrival order a million rows
   * marked cards all over the arrays, again and again, and the refinement threads took as
   * much CPU as the build itself; in slot order each card is marked about once. The sorts
   * are stable, so the rows of one key (a row and a later tombstone) keep their order.
   */
  void build(Snap<T> snap) {
    if (snap.values != null) {
      return;
    }
    if (snap.received != null) {
      snap.rows = decode(snap.received);
      snap.received = null;
    }
    RowBatch rows = snap.rows;
    snap.rows = null;
    int n = rows.size;

    ConcurrentHashMap<String, T> vs = new ConcurrentHashMap<>(Math.max(16, n));
    int bits = RowBatch.concurrentHashMapSlotBits(Math.max(16, n));
    int[] slot = new int[n];
    for (int x = 0; x < n; x++) {
      int h = rows.codes[x];
      slot[x] = (h ^ (h >>> 16)) & ((1 << bits) - 1); // ConcurrentHashMap.spread, masked
    }
    for (int x : RowBatch.order(slot, n, bits)) {
      @SuppressWarnings("unchecked")
      T t = (T) rows.values[x];
      if (t != null) {
        vs.put(rows.keys[x], t);
      } else {
        vs.remove(rows.keys[x]);
      }
    }

    HashTable hs = HashTable.sized(n, keepRaw);
    for (int x = 0; x < n; x++) {
      slot[x] = hs.homeOfCode(rows.codes[x]);
    }
    for (int x : RowBatch.order(slot, n, hs.slotBits())) {
      if (rows.tombstones[x]) {
        hs.remove(rows.keys[x]);
      } else {
        hs.put(rows.keys[x], rows.codes[x], rows.hashes[x], keepRaw ? rows.raws[x] : null);
      }
    }
    snap.values = vs;
    snap.hashes = hs;
  }

  /** Received rows, decoded: key, row hash (of the bytes in place) and value. */
  private RowBatch decode(SnapshotRows received) {
    RowBatch rows = new RowBatch(received.count(), keepRaw);
    received.forEach((b, k, rest, v, len) -> {
      String key = new String(b, rest, v - 1 - rest, StandardCharsets.UTF_8);
      if (len < 0) {
        rows.remove(key);
        return;
      }
      byte[] raw = keepRaw ? java.util.Arrays.copyOfRange(b, v, v + len) : null;
      rows.add(key, XxHash64.hash(b, k, v + len - k), decode(key, b, v, len), raw);
    });
    return rows;
  }

  private void account(String key, Held<T> old, Held<T> nu, List<Runnable> changes) {
    if (old != null) {
      hashSum -= old.hash();
    }
    if (nu != null) {
      hashSum += nu.hash();
    }
    for (Map.Entry<String, Function<T, Collection<String>>> e : indexFns.entrySet()) {
      ConcurrentHashMap<String, Set<String>> ix = indexes.get(e.getKey());
      Collection<String> was = old == null || old.value() == null ? List.of() : e.getValue().apply(old.value());
      Collection<String> is = nu == null || nu.value() == null ? List.of() : e.getValue().apply(nu.value());
      for (String w : was) {
        if (!is.contains(w)) {
          Set<String> s = ix.get(w);
          if (s != null) {
            s.remove(key);
            if (s.isEmpty()) {
              ix.remove(w);
            }
          }
        }
      }
      for (String v : is) {
        ix.computeIfAbsent(v, x -> ConcurrentHashMap.newKeySet()).add(key);
      }
    }
    if (!listeners.isEmpty() && (old == null ? nu != null : nu == null || old.hash() != nu.hash())) {
      T o = old == null ? null : old.value();
      T n = nu == null ? null : nu.value();
      changes.add(() -> client.notify(key, () -> {
        for (ChangeListener<T> l : listeners) {
          l.onChange(key, o, n);
        }
      }, name));
    }
  }

  /** Replaces every row with a snapshot's, queueing the changes. */
  void replace(Snap<T> snap, List<Runnable> changes) {
    build(snap);
    if (hashes.isEmpty()) {
      // An empty view takes the snapshot's maps as they are: nothing to compare them with.
      if (!indexFns.isEmpty() || !listeners.isEmpty()) {
        snap.hashes.forEach((k, h, raw) -> account(k, null, new Held<>(snap.values.get(k), h), changes));
      }
      hashSum = snap.hashes.sum();
      hashes = snap.hashes;
      values = snap.values;
      return;
    }
    Set<String> gone = new HashSet<>(hashes.keyList());
    for (String k : snap.hashes.keyList()) {
      gone.remove(k);
    }
    for (String k : gone) {
      Held<T> old = held(k);
      values.remove(k);
      hashes.remove(k);
      account(k, old, null, changes);
    }
    snap.hashes.forEach((k, h, raw) -> {
      Held<T> old = held(k);
      T v = snap.values.get(k);
      if (v != null) {
        values.put(k, v);
      } else {
        values.remove(k);
      }
      hashes.put(k, h, raw);
      account(k, old, new Held<>(v, h), changes);
    });
  }

  byte[] prefix() {
    return prefix;
  }
}
