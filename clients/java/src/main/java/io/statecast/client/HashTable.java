package io.statecast.client;

import java.util.ArrayList;
import java.util.List;

/**
 * The row hashes of a view: key to 64-bit hash, open addressing with linear probing, no
 * object per entry (a view of a million rows would otherwise keep a map node and a boxed
 * long per row for the collector to copy). Not thread-safe: the receive thread's only.
 */
final class HashTable {
  private String[] keys;
  private long[] hashes;
  private int size;

  HashTable() {
    this(16);
  }

  private HashTable(int capacity) {
    keys = new String[capacity];
    hashes = new long[capacity];
  }

  int size() {
    return size;
  }

  boolean isEmpty() {
    return size == 0;
  }

  private int slot(String key) {
    int mask = keys.length - 1;
    int h = key.hashCode();
    int i = (h ^ (h >>> 16)) & mask;
    while (keys[i] != null && !keys[i].equals(key)) {
      i = (i + 1) & mask;
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
    int i = slot(key);
    if (keys[i] == null) {
      keys[i] = key;
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
    size--;
    // Backward-shift deletion keeps every probe chain unbroken.
    int mask = keys.length - 1;
    int j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (keys[j] == null) {
        return;
      }
      int h = keys[j].hashCode();
      int home = (h ^ (h >>> 16)) & mask;
      // Move keys[j] to i when its home is not within (i, j] cyclically.
      boolean between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!between) {
        keys[i] = keys[j];
        hashes[i] = hashes[j];
        keys[j] = null;
        i = j;
      }
    }
  }

  private void grow() {
    String[] ok = keys;
    long[] oh = hashes;
    keys = new String[ok.length * 2];
    hashes = new long[ok.length * 2];
    for (int i = 0; i < ok.length; i++) {
      if (ok[i] != null) {
        int s = slot(ok[i]);
        keys[s] = ok[i];
        hashes[s] = oh[i];
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
    void visit(String key, long hash);
  }

  void forEach(Visitor v) {
    for (int i = 0; i < keys.length; i++) {
      if (keys[i] != null) {
        v.visit(keys[i], hashes[i]);
      }
    }
  }
}
