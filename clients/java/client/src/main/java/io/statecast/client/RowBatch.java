package io.statecast.client;

/**
 * The rows of a snapshot or a state file, decoded, in the order they came: what a view's
 * maps are filled from at once, each in its own slot order ({@link View#build}).
 */
final class RowBatch {
  final String[] keys;
  final int[] codes; // keys[i].hashCode()
  final long[] hashes; // row hashes
  final Object[] values; // decoded values; null when a row did not decode or is a tombstone
  final byte[][] raws; // raw values, when the view keeps them
  final boolean[] tombstones;
  int size;

  RowBatch(int capacity, boolean keepRaw) {
    keys = new String[capacity];
    codes = new int[capacity];
    hashes = new long[capacity];
    values = new Object[capacity];
    raws = keepRaw ? new byte[capacity][] : null;
    tombstones = new boolean[capacity];
  }

  /** Adds a row; raw is kept only when the batch keeps raw values. */
  void add(String key, long hash, Object value, byte[] raw) {
    int x = size++;
    keys[x] = key;
    codes[x] = key.hashCode();
    hashes[x] = hash;
    values[x] = value;
    if (raws != null) {
      raws[x] = raw;
    }
  }

  /** Adds a tombstone: removes the key's earlier row. */
  void remove(String key) {
    int x = size++;
    keys[x] = key;
    codes[x] = key.hashCode();
    tombstones[x] = true;
  }

  /**
   * The indexes 0..size-1 ordered by bucket[i] (each in [0, 1 << bits)), stable: a radix
   * sort in passes of at most 11 bits.
   */
  static int[] order(int[] bucket, int size, int bits) {
    int[] a = new int[size];
    for (int i = 0; i < size; i++) {
      a[i] = i;
    }
    int[] tmp = new int[size];
    for (int lo = 0; lo < bits; lo += 11) {
      int w = Math.min(11, bits - lo);
      int mask = (1 << w) - 1;
      int[] count = new int[(1 << w) + 1];
      for (int i = 0; i < size; i++) {
        count[((bucket[a[i]] >>> lo) & mask) + 1]++;
      }
      for (int d = 0; d < 1 << w; d++) {
        count[d + 1] += count[d];
      }
      for (int i = 0; i < size; i++) {
        tmp[count[(bucket[a[i]] >>> lo) & mask]++] = a[i];
      }
      int[] t = a;
      a = tmp;
      tmp = t;
    }
    return a;
  }

  /**
   * log2 of the slots of {@code new ConcurrentHashMap<>(rows)}, as OpenJDK 17 sizes it (one
   * plus rows over the load factor, to a power of two): the order {@link View#build} fills
   * it in. A JDK that sizes it otherwise costs speed, not correctness.
   */
  static int concurrentHashMapSlotBits(int rows) {
    long size = (long) (1.0 + rows / 0.75);
    int bits = 64 - Long.numberOfLeadingZeros(Math.max(1, size - 1));
    return Math.min(bits, 30);
  }
}
