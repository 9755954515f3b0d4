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

  /** A snapshot being received: the values readers will see and the row hashes. */
  static final class Snap<T> {
    final ConcurrentHashMap<String, T> values;
    final HashTable hashes;

    Snap(HashTable hashes, int rows) {
      this.hashes = hashes;
      this.values = new ConcurrentHashMap<>(Math.max(16, rows));
    }
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

  /** An empty snapshot of this view. */
  Snap<T> newSnap() {
    return new Snap<>(new HashTable(keepRaw), 0);
  }

  /** An empty snapshot of this view, sized for rows rows (a state file's). */
  Snap<T> newSnap(int rows) {
    return new Snap<>(HashTable.sized(rows, keepRaw), rows);
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

  long rowHash(String key, byte[] value) {
    byte[] k = key.getBytes(StandardCharsets.UTF_8);
    byte[] b = new byte[prefix.length + k.length + 1 + value.length];
    System.arraycopy(prefix, 0, b, 0, prefix.length);
    System.arraycopy(k, 0, b, prefix.length, k.length);
    System.arraycopy(value, 0, b, prefix.length + k.length + 1, value.length);
    return XxHash64.hash(b, 0, b.length);
  }

  Held<T> decodeRow(String key, byte[] value) {
    T v = null;
    try {
      v = decoder.decode(key, value);
    } catch (Exception e) {
      LOG.error("view {}: row {} does not decode; it is held without a value: {}", name, key,
          e.toString());
    }
    return new Held<>(v, rowHash(key, value));
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
    T v = null;
    try {
      v = decoder.decode(key, value);
    } catch (Exception e) {
      LOG.error("view {}: row {} does not decode; it is held without a value: {}", name, key, e.toString());
    }
    if (v != null) {
      snap.values.put(key, v);
    }
    snap.hashes.put(key, hash, value);
  }

  /** Adds a row to a snapshot being received (value null: removes it). */
  void snapPut(Snap<T> snap, String key, byte[] value) {
    if (value == null) {
      snap.values.remove(key);
      snap.hashes.remove(key);
      return;
    }
    Held<T> h = decodeRow(key, value);
    if (h.value() != null) {
      snap.values.put(key, h.value());
    } else {
      snap.values.remove(key);
    }
    snap.hashes.put(key, h.hash(), value);
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
