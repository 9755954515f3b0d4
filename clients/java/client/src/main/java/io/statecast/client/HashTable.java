package io.statecast.client;

import java.util.ArrayList;
import java.util.List;

/**
 * The row hashes of a view: key to 64-bit hash, open addressing with linear probing, no
 * object per entry (a view of a million rows would otherwise keep a map node and a boxed
 * long per row for the collector to copy). With raw values kept (a client that writes a
 * state file), each key's row value as received too. Not thread-safe: the receive thread's
 * only.
 */
final class HashTable {
  private String[] keys;
  private int[] codes; // keys[i].hashCode(): a probe compares these first, not the keys
  private long[] hashes;
  private byte[][] raws; // null unless raw values are kept; never modified once stored
  private int size;
  private int shift; // 32 - log2(capacity): home() keeps the product's top bits
  private final int seed = java.util.concurrent.ThreadLocalRandom.current().nextInt();
  long probes; // slots a lookup stepped past its home, in all (tests)

  HashTable() {
    this(false);
  }

  HashTable(boolean keepRaw) {
    this(16, keepRaw);
  }

  /** A table that takes rows entries without growing. */
  static HashTable sized(int rows, boolean keepRaw) {
    int cap = 16;
    while (cap * 3 / 4 < rows && cap < 1 << 30) {
      cap <<= 1;
    }
    return new HashTable(cap, keepRaw);
  }

  private HashTable(int capacity, boolean keepRaw) {
    keys = new String[capacity];
    codes = new int[capacity];
    hashes = new long[capacity];
    raws = keepRaw ? new byte[capacity][] : null;
    shift = 32 - Integer.numberOfTrailingZeros(capacity);
  }

  /**
   * The slot a key's probe starts at: Fibonacci hashing (the hash times 2^32 / phi, top
   * bits). String.hashCode of keys that differ in their last characters (ids 1, 2, 3…)
   * differ by small steps, so their low bits occupy runs of consecutive slots, and linear
   * probing from inside a run walks to its end: with a million numeric keys the probes were
   * most of a cold start. The multiplication spreads such hashes over the table.
   *
   * <p>The seed, a table's own and mixed into the code first, makes one table's slot order
   * unrelated to another's. Without it, keys fed in a table's slot order (a state file is
   * written in it, a snapshot is applied from one) come sorted by home; a smaller table maps
   * them all to its first slots, into one run that every later insert walks: quadratic in
   * the rows.
   */
  private int home(int code) {
    // MurmurHash3's finalizer of the seeded code: every bit of the result depends on every
    // bit of both, so two seeds order the same keys unrelatedly (a seed XORed in before a
    // multiplication alone does not: codes that differ only in low bits keep their order).
    int h = code ^ seed;
    h ^= h >>> 16;
    h *= 0x85EBCA6B;
    h ^= h >>> 13;
    h *= 0xC2B2AE35;
    h ^= h >>> 16;
    return (h * 0x9E3779B9) >>> shift;
  }

  /** The slot the probe of a key whose hashCode is code starts at, in [0, 1 << slotBits()). */
  int homeOfCode(int code) {
    return home(code);
  }

  /** log2 of the capacity. */
  int slotBits() {
    return 32 - shift;
  }

  int size() {
    return size;
  }

  boolean isEmpty() {
    return size == 0;
  }

  // The keys are scattered in memory and the arrays are not: a probe reads codes and
  // touches a key only when its code matches.
  private int slot(String key) {
    return slot(key, key.hashCode());
  }

  private int slot(String key, int code) {
    int mask = keys.length - 1;
    int i = home(code);
    while (keys[i] != null && (codes[i] != code || !keys[i].equals(key))) {
      i = (i + 1) & mask;
      probes++;
    }
    return i;
  }

  boolean contains(String key) {
    return keys[slot(key)] != null;
  }

  /** The hash of key; only meaningful when {@link #contains} is true. */
  long get(String key) {
    return hashes[slot(key)];
  }

  void put(String key, long hash) {
    put(key, hash, null);
  }

  /** Sets key's hash and, when raw values are kept, its raw value. */
  void put(String key, long hash, byte[] raw) {
    put(key, key.hashCode(), hash, raw);
  }

  /** put, with the key's hashCode known (the key is not read unless another has that code). */
  void put(String key, int code, long hash, byte[] raw) {
    int i = slot(key, code);
    if (raws != null) {
      raws[i] = raw;
    }
    if (keys[i] == null) {
      keys[i] = key;
      codes[i] = code;
      size++;
      hashes[i] = hash;
      if (size * 4 > keys.length * 3) {
        grow();
      }
      return;
    }
    hashes[i] = hash;
  }

  void remove(String key) {
    int i = slot(key);
    if (keys[i] == null) {
      return;
    }
    keys[i] = null;
    if (raws != null) {
      raws[i] = null;
    }
    size--;
    // Backward-shift deletion keeps every probe chain unbroken.
    int mask = keys.length - 1;
    int j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (keys[j] == null) {
        return;
      }
      int home = home(codes[j]);
      // Move keys[j] to i when its home is not within (i, j] cyclically.
      boolean between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!between) {
        keys[i] = keys[j];
        codes[i] = codes[j];
        hashes[i] = hashes[j];
        keys[j] = null;
        if (raws != null) {
          raws[i] = raws[j];
          raws[j] = null;
        }
        i = j;
      }
    }
  }

  private void grow() {
    String[] ok = keys;
    int[] oc = codes;
    long[] oh = hashes;
    byte[][] or = raws;
    keys = new String[ok.length * 2];
    codes = new int[ok.length * 2];
    hashes = new long[ok.length * 2];
    raws = or == null ? null : new byte[ok.length * 2][];
    shift--;
    int mask = keys.length - 1;
    for (int i = 0; i < ok.length; i++) {
      if (ok[i] != null) {
        int s = home(oc[i]); // the keys are distinct: the first free slot
        while (keys[s] != null) {
          s = (s + 1) & mask;
        }
        keys[s] = ok[i];
        codes[s] = oc[i];
        hashes[s] = oh[i];
        if (or != null) {
          raws[s] = or[i];
        }
      }
    }
  }

  /** The sum of every hash, mod 2^64. */
  long sum() {
    long s = 0;
    for (int i = 0; i < keys.length; i++) {
      if (keys[i] != null) {
        s += hashes[i];
      }
    }
    return s;
  }

  /** Every key, in no order. */
  List<String> keyList() {
    List<String> out = new ArrayList<>(size);
    for (String k : keys) {
      if (k != null) {
        out.add(k);
      }
    }
    return out;
  }

  interface Visitor {
    /** One entry; raw is null unless raw values are kept. */
    void visit(String key, long hash, byte[] raw);
  }

  void forEach(Visitor v) {
    for (int i = 0; i < keys.length; i++) {
      if (keys[i] != null) {
        v.visit(keys[i], hashes[i], raws == null ? null : raws[i]);
      }
    }
  }

  /** Whether raw values are kept. */
  boolean keepsRaw() {
    return raws != null;
  }

  /**
   * The keys and raw values as of now, for a state file written on another thread: copies
   * of the arrays (not of the keys or values, which are never modified), so later puts do
   * not show. Raw values must be kept.
   */
  Rows rows() {
    return new Rows(keys.clone(), raws.clone(), size);
  }

  /** The rows of {@link #rows()}: slot i holds a row when keys[i] is not null. */
  record Rows(String[] keys, byte[][] raws, int size) {}
}
