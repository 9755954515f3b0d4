package io.statecast.client;

import java.util.ArrayList;
import java.util.List;

/**
 * A view's snapshot rows as received, kept as bytes until the snapshot ends, when the view
 * builds its maps from them at once ({@link View#build}).
 *
 * <p>Why not build the maps as rows arrive: a view's maps would grow row by row, and the
 * collector would copy every row's objects at each young collection until they reached the
 * old generation, while each insert into the maps' large arrays (themselves old) marked a
 * card for the collector's refinement threads. On a 2-core machine those threads took more
 * CPU than the client's own code. Rows kept here are byte arrays of 1 MiB with no
 * references: a young collection copies them as plain bytes, with nothing to trace, and no
 * card is marked. At the end the row count is known, so the maps are sized once and never
 * rehash.
 *
 * <p>A row is laid out as {@code [int rest][int keyLen][int valueLen][key][0][value]}:
 * {@code rest} is where the view-held key starts in the record key (after the view prefix),
 * {@code valueLen} is -1 for a tombstone; the record key, a zero byte and the value are the
 * bytes of the row hash (schemas/README.md, "Row hash"), hashed in place.
 */
final class SnapshotRows {
  // Under half a G1 region on the heap it was measured with (4 MiB regions): an array of
  // half a region or more is allocated in the old generation, and 4 MiB chunks (two regions
  // each, with the array header) started a concurrent marking cycle during the snapshot.
  private static final int CHUNK = 1 << 20;
  private static final int HEADER = 12;

  private final List<byte[]> chunks = new ArrayList<>();
  private final List<Integer> used = new ArrayList<>();
  private byte[] cur;
  private int pos;
  private int count;

  /** What a row visitor is given: offsets into buf. */
  interface Visitor {
    /**
     * One row: the record key is buf[key, value - 1), the view-held key starts at rest, the
     * zero byte is at value - 1; the value is buf[value, value + valueLen), valueLen -1 for a
     * tombstone.
     */
    void row(byte[] buf, int key, int rest, int value, int valueLen);
  }

  /** Rows added, tombstones included. */
  int count() {
    return count;
  }

  /**
   * Adds a row: its record key b[key, key + keyLen) and value b[value, value + valueLen)
   * (valueLen -1: a tombstone). Returns false, adding nothing, when the record key has no
   * view prefix (no unescaped {@code |}).
   */
  boolean add(byte[] b, int key, int keyLen, int value, int valueLen) {
    int at = reserve(keyLen, valueLen);
    System.arraycopy(b, key, cur, at, keyLen);
    if (valueLen >= 0) {
      System.arraycopy(b, value, cur, at + keyLen + 1, valueLen);
    }
    return commit(at);
  }

  // Room for a row, its header written; returns where its key goes.
  private int reserve(int k, int v) {
    int need = HEADER + k + 1 + Math.max(v, 0);
    if (cur == null || cur.length - pos < need) {
      seal();
      cur = new byte[Math.max(CHUNK, need)];
      pos = 0;
    }
    putInt(cur, pos + 4, k);
    putInt(cur, pos + 8, v);
    cur[pos + HEADER + k] = 0;
    return pos + HEADER;
  }

  // The row reserved at at, its bytes copied: kept when its key has a view prefix.
  private boolean commit(int at) {
    int k = getInt(cur, pos + 4);
    int v = getInt(cur, pos + 8);
    int rest = restOf(cur, at, at + k);
    if (rest < 0) {
      return false;
    }
    putInt(cur, pos, rest - at);
    pos = at + k + 1 + Math.max(v, 0);
    count++;
    return true;
  }

  /** Visits the rows in the order they were added. */
  void forEach(Visitor f) {
    seal();
    for (int c = 0; c < chunks.size(); c++) {
      byte[] b = chunks.get(c);
      int end = used.get(c);
      for (int p = 0; p < end; ) {
        int rest = getInt(b, p);
        int k = getInt(b, p + 4);
        int v = getInt(b, p + 8);
        int key = p + HEADER;
        f.row(b, key, key + rest, key + k + 1, v);
        p = key + k + 1 + Math.max(v, 0);
      }
    }
  }

  private void seal() {
    if (cur != null) {
      chunks.add(cur);
      used.add(pos);
      cur = null;
    }
  }

  /**
   * Where the view-held key starts: after the first unescaped {@code |} of the record key
   * in b[from, to); -1 when there is none. The escape and the separator are ASCII, which is
   * never part of a multi-byte UTF-8 sequence, so the bytes can be scanned as they are.
   */
  static int restOf(byte[] b, int from, int to) {
    for (int i = from; i < to; i++) {
      if (b[i] == '\\') {
        i++;
      } else if (b[i] == '|') {
        return i + 1;
      }
    }
    return -1;
  }

  private static void putInt(byte[] b, int at, int x) {
    b[at] = (byte) (x >>> 24);
    b[at + 1] = (byte) (x >>> 16);
    b[at + 2] = (byte) (x >>> 8);
    b[at + 3] = (byte) x;
  }

  private static int getInt(byte[] b, int at) {
    return (b[at] & 0xff) << 24 | (b[at + 1] & 0xff) << 16 | (b[at + 2] & 0xff) << 8 | (b[at + 3] & 0xff);
  }
}
