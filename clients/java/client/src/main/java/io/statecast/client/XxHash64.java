package io.statecast.client;

/**
 * XXH64 with seed 0, the hash of the record format's row hash (schemas/README.md, "Control
 * records"): written here rather than taken from a library because the client needs only
 * this one function over byte arrays.
 */
final class XxHash64 {
  private static final long P1 = 0x9E3779B185EBCA87L;
  private static final long P2 = 0xC2B2AE3D27D4EB4FL;
  private static final long P3 = 0x165667B19E3779F9L;
  private static final long P4 = 0x85EBCA77C2B2AE63L;
  private static final long P5 = 0x27D4EB2F165667C5L;

  private XxHash64() {}

  /** Hashes the concatenation of the given parts. */
  static long hash(byte[]... parts) {
    int n = 0;
    for (byte[] p : parts) {
      n += p.length;
    }
    byte[] b;
    if (parts.length == 1) {
      b = parts[0];
    } else {
      b = new byte[n];
      int o = 0;
      for (byte[] p : parts) {
        System.arraycopy(p, 0, b, o, p.length);
        o += p.length;
      }
    }
    return hash(b, 0, n);
  }

  static long hash(byte[] b, int off, int len) {
    int end = off + len;
    int i = off;
    long h;
    if (len >= 32) {
      long[] v = {P1 + P2, P2, 0, -P1};
      i = stripes(v, b, i, end);
      h = converge(v);
    } else {
      h = P5;
    }
    return tail(h + len, b, i, end);
  }

  /** Folds the 32-byte stripes of b[i, end) into the lanes; returns where the rest starts. */
  private static int stripes(long[] v, byte[] b, int i, int end) {
    long v1 = v[0];
    long v2 = v[1];
    long v3 = v[2];
    long v4 = v[3];
    for (; i + 32 <= end; i += 32) {
      v1 = round(v1, le64(b, i));
      v2 = round(v2, le64(b, i + 8));
      v3 = round(v3, le64(b, i + 16));
      v4 = round(v4, le64(b, i + 24));
    }
    v[0] = v1;
    v[1] = v2;
    v[2] = v3;
    v[3] = v4;
    return i;
  }

  private static long converge(long[] v) {
    long h = Long.rotateLeft(v[0], 1) + Long.rotateLeft(v[1], 7) + Long.rotateLeft(v[2], 12)
        + Long.rotateLeft(v[3], 18);
    h = merge(h, v[0]);
    h = merge(h, v[1]);
    h = merge(h, v[2]);
    return merge(h, v[3]);
  }

  /** Mixes in the last (fewer than 32) bytes b[i, end) and avalanches. */
  private static long tail(long h, byte[] b, int i, int end) {
    while (i + 8 <= end) {
      h ^= round(0, le64(b, i));
      h = Long.rotateLeft(h, 27) * P1 + P4;
      i += 8;
    }
    if (i + 4 <= end) {
      h ^= (le32(b, i) & 0xFFFFFFFFL) * P1;
      h = Long.rotateLeft(h, 23) * P2 + P3;
      i += 4;
    }
    while (i < end) {
      h ^= (b[i] & 0xFFL) * P5;
      h = Long.rotateLeft(h, 11) * P1;
      i++;
    }
    h ^= h >>> 33;
    h *= P2;
    h ^= h >>> 29;
    h *= P3;
    h ^= h >>> 32;
    return h;
  }

  /** XXH64 of bytes given in pieces (the state file's checksum); equal to hash of them whole. */
  static final class Streaming {
    private final long[] v = {P1 + P2, P2, 0, -P1};
    private final byte[] buf = new byte[32];
    private int n;
    private long total;

    void update(byte[] b, int off, int len) {
      total += len;
      int end = off + len;
      if (n > 0) {
        int take = Math.min(32 - n, len);
        System.arraycopy(b, off, buf, n, take);
        n += take;
        off += take;
        if (n < 32) {
          return;
        }
        stripes(v, buf, 0, 32);
        n = 0;
      }
      off = stripes(v, b, off, end);
      System.arraycopy(b, off, buf, 0, end - off);
      n = end - off;
    }

    long digest() {
      long h = total >= 32 ? converge(v) : P5;
      return tail(h + total, buf, 0, n);
    }
  }

  private static long round(long acc, long input) {
    acc += input * P2;
    acc = Long.rotateLeft(acc, 31);
    return acc * P1;
  }

  private static long merge(long acc, long v) {
    acc ^= round(0, v);
    return acc * P1 + P4;
  }

  private static long le64(byte[] b, int i) {
    return (b[i] & 0xFFL) | (b[i + 1] & 0xFFL) << 8 | (b[i + 2] & 0xFFL) << 16
        | (b[i + 3] & 0xFFL) << 24 | (b[i + 4] & 0xFFL) << 32 | (b[i + 5] & 0xFFL) << 40
        | (b[i + 6] & 0xFFL) << 48 | (b[i + 7] & 0xFFL) << 56;
  }

  private static int le32(byte[] b, int i) {
    return (b[i] & 0xFF) | (b[i + 1] & 0xFF) << 8 | (b[i + 2] & 0xFF) << 16 | (b[i + 3] & 0xFF) << 24;
  }
}
