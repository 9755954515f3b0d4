package io.statecast.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The state file (schemas/README.md, "State files"): a client's views and position, written
 * so that a restart resumes from the player instead of taking a snapshot. Format 5, the
 * layout the Go client writes and reads: after an 8-byte magic ({@code SCSTATE5}, or
 * {@code SCSTATK5} when authenticated by a key) unsigned varints, strings as a varint
 * length and their bytes, the index as a zigzag varint; the file ends with the xxhash64 of
 * everything before it, 8 bytes big endian, or with a key the HMAC-SHA256 of it.
 *
 * <p>The file is written to a temporary file, forced to disk, renamed over the old one and
 * the directory forced, so that a crash leaves the old file or the new one.
 */
final class StateFile {
  static final String NAME = "cacheclient.state";
  static final String MAGIC = "SCSTATE5";
  static final String MAGIC_MAC = "SCSTATK5";
  /** The shortest state key: HMAC-SHA256's output size. */
  static final int MIN_KEY_BYTES = 32;

  /** One view's rows: slot i is a row when keys[i] is not null (a HashTable's arrays). */
  record ViewRows(String name, String selection, String[] keys, byte[][] raws, int size) {}

  /** What a file holds besides the rows. */
  record Content(long index, byte[] topic, Position position, boolean positionSeen, Map<String, String> selections) {}

  /** Receives the rows of the views a client holds as the file is read. */
  interface Sink {
    /** The next rows are rows rows of view. */
    void view(String view, int rows);

    /**
     * A row of the last view: its key without the view prefix, its value as received, and
     * its row hash (schemas/README.md, "Control records").
     */
    void row(String key, byte[] raw, long hash);
  }

  /** A file that cannot be used; the message says why. */
  static final class BadFile extends Exception {
    final boolean auth; // refused by the key, not corrupt

    BadFile(String msg, boolean auth) {
      super(msg);
      this.auth = auth;
    }
  }

  private StateFile() {}

  // ---- writing ----

  /** Writes the file into dir atomically and returns its size. */
  static long write(Path dir, String stream, byte[] key, long index, byte[] topic, Position pos,
      boolean positionSeen, List<ViewRows> views) throws IOException {
    Files.createDirectories(dir);
    Path tmp = Files.createTempFile(dir, NAME + ".tmp", "");
    long n;
    try {
      try (var ch = java.nio.channels.FileChannel.open(tmp, StandardOpenOption.WRITE)) {
        OutputStream os = java.nio.channels.Channels.newOutputStream(ch);
        Body body = new Body(os, key);
        encode(body, stream, index, topic, pos, positionSeen, views);
        body.finish();
        ch.force(true);
        n = body.count;
      }
      Files.move(tmp, dir.resolve(NAME), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException | RuntimeException e) {
      Files.deleteIfExists(tmp);
      throw e;
    }
    // Without the directory's fsync the rename may not survive a crash.
    try (var d = java.nio.channels.FileChannel.open(dir, StandardOpenOption.READ)) {
      d.force(true);
    } catch (IOException e) {
      throw new IOException("state file written, its directory not synced: " + e.getMessage(), e);
    }
    return n;
  }

  /** Removes the temporary files of writes a crash interrupted. */
  static void removeTemps(Path dir) {
    try (var s = Files.newDirectoryStream(dir, NAME + ".tmp*")) {
      for (Path p : s) {
        Files.deleteIfExists(p);
      }
    } catch (IOException e) {
      // No directory yet, or unreadable: the next write reports it.
    }
  }

  private static void encode(Body w, String stream, long index, byte[] topic, Position pos,
      boolean positionSeen, List<ViewRows> views) throws IOException {
    w.bytes(w.mac != null ? MAGIC_MAC.getBytes(StandardCharsets.US_ASCII) : MAGIC.getBytes(StandardCharsets.US_ASCII));
    w.str(stream.getBytes(StandardCharsets.UTF_8));
    w.str(topic);
    w.uvarint((index << 1) ^ (index >> 63));
    boolean hasLsn = positionSeen && pos.lsn() != Position.NONE;
    w.uvarint((positionSeen ? 1 : 0) | (hasLsn ? 2 : 0));
    w.uvarint(hasLsn ? pos.lsn() : 0);
    List<String> stale = positionSeen ? new ArrayList<>(pos.stale()) : List.of();
    w.uvarint(stale.size());
    for (String s : stale) {
      w.str(s.getBytes(StandardCharsets.UTF_8));
    }
    // Sorted by name, as the Go client writes them (byte order of the UTF-8 names).
    TreeMap<String, Long> behind = new TreeMap<>(StateFile::utf8Order);
    if (hasLsn) {
      behind.putAll(pos.behind());
    }
    w.uvarint(behind.size());
    for (Map.Entry<String, Long> b : behind.entrySet()) {
      w.str(b.getKey().getBytes(StandardCharsets.UTF_8));
      w.uvarint(b.getValue());
    }
    w.uvarint(views.size());
    for (ViewRows v : views) {
      w.str(v.name().getBytes(StandardCharsets.UTF_8));
      w.str(v.selection().getBytes(StandardCharsets.UTF_8));
      w.uvarint(v.size());
      int written = 0;
      for (int i = 0; i < v.keys().length; i++) {
        if (v.keys()[i] != null) {
          w.str(v.keys()[i].getBytes(StandardCharsets.UTF_8));
          w.str(v.raws()[i]);
          written++;
        }
      }
      if (written != v.size()) {
        throw new IllegalStateException("view " + v.name() + ": " + written + " rows written of " + v.size());
      }
    }
  }

  private static int utf8Order(String a, String b) {
    return java.util.Arrays.compareUnsigned(a.getBytes(StandardCharsets.UTF_8), b.getBytes(StandardCharsets.UTF_8));
  }

  /** The file's bytes as they are written: buffered, counted, and checksummed or MACed. */
  private static final class Body {
    final OutputStream out;
    final Mac mac;
    final XxHash64.Streaming sum;
    final byte[] buf = new byte[1 << 16];
    int n;
    long count;

    Body(OutputStream out, byte[] key) {
      this.out = out;
      if (key != null) {
        try {
          mac = Mac.getInstance("HmacSHA256");
          mac.init(new SecretKeySpec(key, "HmacSHA256"));
        } catch (GeneralSecurityException e) {
          throw new IllegalStateException("HMAC-SHA256: " + e.getMessage(), e);
        }
        sum = null;
      } else {
        mac = null;
        sum = new XxHash64.Streaming();
      }
    }

    void flushBuf() throws IOException {
      if (n > 0) {
        if (mac != null) {
          mac.update(buf, 0, n);
        } else {
          sum.update(buf, 0, n);
        }
        out.write(buf, 0, n);
        count += n;
        n = 0;
      }
    }

    void bytes(byte[] b) throws IOException {
      if (b.length > buf.length - n) {
        flushBuf();
        if (b.length > buf.length) {
          if (mac != null) {
            mac.update(b);
          } else {
            sum.update(b, 0, b.length);
          }
          out.write(b);
          count += b.length;
          return;
        }
      }
      System.arraycopy(b, 0, buf, n, b.length);
      n += b.length;
    }

    void uvarint(long x) throws IOException {
      if (buf.length - n < 10) {
        flushBuf();
      }
      while (Long.compareUnsigned(x, 0x80) >= 0) {
        buf[n++] = (byte) (x | 0x80);
        x >>>= 7;
      }
      buf[n++] = (byte) x;
    }

    void str(byte[] b) throws IOException {
      uvarint(b.length);
      bytes(b);
    }

    void finish() throws IOException {
      flushBuf();
      byte[] trailer;
      if (mac != null) {
        trailer = mac.doFinal();
      } else {
        long h = sum.digest();
        trailer = new byte[8];
        for (int i = 0; i < 8; i++) {
          trailer[i] = (byte) (h >>> (56 - 8 * i));
        }
      }
      out.write(trailer);
      out.flush();
      count += trailer.length;
    }
  }

  // ---- reading ----

  /**
   * Reads and verifies a whole file (checksum or MAC first, then the structure) for a client
   * of stream with the given views (name to selection string), giving the rows of those
   * views to sink as they are read, or with sink null only verifying them. Every view must
   * be in the file with that selection; views of the file the client does not hold are
   * skipped. The file is verified whole only at the end: a caller uses what sink received
   * only when this returns.
   */
  static Content read(byte[] b, String stream, byte[] key, Map<String, String> views, Sink sink) throws BadFile {
    boolean keyed;
    String magic = b.length >= 8 ? new String(b, 0, 8, StandardCharsets.US_ASCII) : "";
    switch (magic) {
      case MAGIC_MAC -> keyed = true;
      case MAGIC -> keyed = false;
      default -> throw new BadFile("not a state file of format 5 (magic " + (magic.startsWith("SCSTAT")
          ? magic : "unknown") + ")", false);
    }
    int body;
    if (key != null && !keyed) {
      throw new BadFile("the file has a checksum, no MAC: written without a state key, or by anyone who can write the directory", true);
    } else if (key == null && keyed) {
      throw new BadFile("the file is authenticated by a key, and this client has none to verify it", false);
    } else if (keyed) {
      if (b.length < 8 + 32) {
        throw new BadFile("the file ends before its MAC", true);
      }
      body = b.length - 32;
      try {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(key, "HmacSHA256"));
        mac.update(b, 0, body);
        if (!MessageDigest.isEqual(mac.doFinal(), java.util.Arrays.copyOfRange(b, body, b.length))) {
          throw new BadFile("its MAC does not verify: forged, corrupt, or written with another key", true);
        }
      } catch (GeneralSecurityException e) {
        throw new BadFile("HMAC-SHA256: " + e.getMessage(), true);
      }
    } else {
      if (b.length < 16) {
        throw new BadFile("the file ends before its checksum", false);
      }
      body = b.length - 8;
      long want = 0;
      for (int i = 0; i < 8; i++) {
        want = want << 8 | (b[body + i] & 0xff);
      }
      long got = XxHash64.hash(b, 0, body);
      if (got != want) {
        throw new BadFile(String.format("checksum %016x, content hashes to %016x (corrupt or truncated)", want, got), false);
      }
    }
    Reader r = new Reader(b, 8, body);
    String st = r.string("stream name");
    if (!st.equals(stream)) {
      throw new BadFile("file of stream \"" + st + "\", client of stream \"" + stream + "\"", false);
    }
    byte[] topic = r.str("topic ID");
    if (topic.length > 64) {
      throw new BadFile("topic ID of " + topic.length + " bytes", false);
    }
    long zz = r.uvarint("index");
    long index = (zz >>> 1) ^ -(zz & 1);
    if (index < 0) {
      throw new BadFile("index " + index, false);
    }
    long flags = r.uvarint("source state");
    long lsn = r.uvarint("source state");
    long nstale = r.uvarint("source state");
    if (flags > 3 || flags == 2 || (flags == 0 && nstale > 0) || nstale > 1 << 16) {
      throw new BadFile("source state", false);
    }
    Set<String> stale = new HashSet<>();
    for (long i = 0; i < nstale; i++) {
      String v = r.string("stale view name");
      if (views.containsKey(v)) {
        stale.add(v);
      }
    }
    long nb = r.uvarint("views behind");
    if (nb > 1 << 16 || ((flags & 2) == 0 && nb > 0)) {
      throw new BadFile("views behind", false);
    }
    Map<String, Long> behind = new HashMap<>();
    for (long i = 0; i < nb; i++) {
      behind.put(r.string("view behind"), r.uvarint("view behind"));
    }
    boolean seen = (flags & 1) != 0;
    Position pos = !seen ? Position.UNKNOWN
        : new Position((flags & 2) != 0 ? lsn : Position.NONE, Map.copyOf(behind), Set.copyOf(stale));
    long nv = r.uvarint("view count");
    if (nv > 1 << 16) {
      throw new BadFile("view count " + nv, false);
    }
    Map<String, String> sels = new LinkedHashMap<>();
    Set<String> seenViews = new HashSet<>();
    byte[] hbuf = new byte[256]; // a record's key, a zero byte and its value, for its row hash
    for (long i = 0; i < nv; i++) {
      String name = r.string("view name");
      if (!seenViews.add(name)) {
        throw new BadFile("view \"" + name + "\" twice", false);
      }
      String sel = r.string("selection of \"" + name + "\"");
      long n = r.uvarint("row count of \"" + name + "\"");
      if (n > body) {
        throw new BadFile("row count of \"" + name + "\"", false);
      }
      boolean keep = views.containsKey(name);
      String what = "row of \"" + name + "\"";
      byte[] prefix = (Keys.escape(name) + "|").getBytes(StandardCharsets.UTF_8);
      System.arraycopy(prefix, 0, hbuf = grow(hbuf, prefix.length), 0, prefix.length);
      if (keep) {
        sels.put(name, sel);
        if (sink == null) {
          keep = false; // verifying only: the rows are skipped
        } else {
          sink.view(name, (int) n);
        }
      }
      for (long j = 0; j < n; j++) {
        int klen = r.len(what);
        int koff = r.p;
        r.p += klen;
        int vlen = r.len(what);
        int voff = r.p;
        r.p += vlen;
        if (keep) {
          int hl = prefix.length + klen + 1 + vlen;
          if (hl > hbuf.length) {
            hbuf = grow(hbuf, hl);
            System.arraycopy(prefix, 0, hbuf, 0, prefix.length);
          }
          System.arraycopy(b, koff, hbuf, prefix.length, klen);
          hbuf[prefix.length + klen] = 0;
          System.arraycopy(b, voff, hbuf, prefix.length + klen + 1, vlen);
          sink.row(new String(b, koff, klen, StandardCharsets.UTF_8), java.util.Arrays.copyOfRange(b, voff, voff + vlen),
              XxHash64.hash(hbuf, 0, hl));
        }
      }
    }
    if (r.p != body) {
      throw new BadFile((body - r.p) + " trailing bytes before the checksum", false);
    }
    for (Map.Entry<String, String> v : views.entrySet()) {
      String sel = sels.get(v.getKey());
      if (sel == null) {
        throw new BadFile("view " + v.getKey() + " is not in the file", false);
      }
      if (!sel.equals(v.getValue())) {
        throw new BadFile("view " + v.getKey() + " was saved with selection \"" + sel
            + "\", the client now selects \"" + v.getValue() + "\"", false);
      }
    }
    return new Content(index, topic, pos, seen, sels);
  }

  /** buf, or a larger copy of it when it is shorter than n. */
  private static byte[] grow(byte[] buf, int n) {
    return n <= buf.length ? buf : java.util.Arrays.copyOf(buf, Math.max(n, buf.length * 2));
  }

  /** Reads varints and strings of a verified body. */
  private static final class Reader {
    final byte[] b;
    final int end;
    int p;

    Reader(byte[] b, int p, int end) {
      this.b = b;
      this.p = p;
      this.end = end;
    }

    long uvarint(String what) throws BadFile {
      long x = 0;
      for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end) {
          throw new BadFile(what + ": the file ends", false);
        }
        int c = b[p++] & 0xff;
        if (shift == 63 && c > 1) {
          throw new BadFile(what + ": varint overflows", false);
        }
        x |= (long) (c & 0x7f) << shift;
        if (c < 0x80) {
          return x;
        }
      }
      throw new BadFile(what + ": varint overflows", false);
    }

    /** A string's length, checked against the file; p is then at its bytes. */
    int len(String what) throws BadFile {
      long n = uvarint(what);
      if (n > end - p) {
        throw new BadFile(what + ": longer than the file", false);
      }
      return (int) n;
    }

    byte[] str(String what) throws BadFile {
      long n = uvarint(what);
      if (n > end - p) {
        throw new BadFile(what + ": longer than the file", false);
      }
      byte[] out = java.util.Arrays.copyOfRange(b, p, p + (int) n);
      p += (int) n;
      return out;
    }

    String string(String what) throws BadFile {
      long n = uvarint(what);
      if (n > end - p) {
        throw new BadFile(what + ": longer than the file", false);
      }
      String s = new String(b, p, (int) n, StandardCharsets.UTF_8);
      p += (int) n;
      return s;
    }
  }

  /** The state file in dir, whole (tests). */
  static byte[] bytesOf(Path dir) throws IOException {
    return Files.readAllBytes(dir.resolve(NAME));
  }

  /** The bytes {@link #write} would write (tests). */
  static byte[] encodeForTest(String stream, byte[] key, long index, byte[] topic, Position pos,
      boolean seen, List<ViewRows> views) throws IOException {
    ByteArrayOutputStream bo = new ByteArrayOutputStream();
    Body body = new Body(bo, key);
    encode(body, stream, index, topic, pos, seen, views);
    body.finish();
    return bo.toByteArray();
  }
}
