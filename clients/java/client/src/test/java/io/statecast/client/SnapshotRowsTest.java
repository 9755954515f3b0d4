package io.statecast.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * A snapshot built from its received rows at its end ({@link View#build}) against the same
 * rows applied one at a time ({@link View#apply}), the path a live batch takes.
 */
class SnapshotRowsTest {
  private static final String[] PARTS = {"a", "b", "é", "|", "\\", "日本", "7"};

  /** A row key of the view: random texts with escapes and multi-byte characters. */
  private static String key(Random r) {
    StringBuilder b = new StringBuilder();
    int n = 1 + r.nextInt(3);
    for (int i = 0; i < n; i++) {
      b.append(PARTS[r.nextInt(PARTS.length)]);
    }
    b.append(r.nextInt(2_000));
    return Keys.join(b.toString(), Integer.toString(r.nextInt(3)));
  }

  @Test
  void buildEqualsRowsAppliedOneByOne() throws Exception {
    for (boolean keepRaw : new boolean[] {false, true}) {
      long seed = System.nanoTime();
      Random r = new Random(seed);
      StatecastClient.Builder cb = StatecastClient.builder().addresses("127.0.0.1:1").stream("s");
      if (keepRaw) {
        cb.stateDir(Files.createTempDirectory("snaprows"));
      }
      // Two clients, not started: the same view in each, one built, one applied.
      try (StatecastClient c = cb.build(); StatecastClient c2 = cb.build()) {
        String name = "ev_ents.v-1";
        // A value "bad" does not decode: held without a value, its row hash kept.
        Decoder<String> dec = (k, v) -> {
          String s = new String(v, StandardCharsets.UTF_8);
          if (s.equals("bad")) {
            throw new IllegalArgumentException("bad row");
          }
          return s;
        };
        View<String> built = c.view(name, dec);
        View<String> applied = c2.view(name, dec);
        View.Snap<String> snap = built.newSnap();
        List<Runnable> changes = new ArrayList<>();
        byte[] prefix = (Keys.escape(name) + "|").getBytes(StandardCharsets.UTF_8);
        int rows = 30_000;
        for (int i = 0; i < rows; i++) {
          String k = key(r);
          String v;
          switch (r.nextInt(10)) {
            case 0 -> v = null; // a tombstone: removes an earlier row of the key
            case 1 -> v = "bad";
            case 2 -> v = "x".repeat(r.nextInt(100) == 0 ? (1 << 20) + r.nextInt(100) : 0); // beyond a chunk, or empty
            default -> v = "{\"v\":" + r.nextInt() + "}";
          }
          ByteString rk = ByteString.copyFrom(prefix).concat(ByteString.copyFromUtf8(k));
          byte[] kb = rk.toByteArray();
          byte[] vb = v == null ? new byte[0] : v.getBytes(StandardCharsets.UTF_8);
          byte[] row = java.util.Arrays.copyOf(kb, kb.length + vb.length);
          System.arraycopy(vb, 0, row, kb.length, vb.length);
          assertTrue(snap.received.add(row, 0, kb.length, kb.length, v == null ? -1 : vb.length), "seed " + seed);
          applied.apply(k, v == null ? null : v.getBytes(StandardCharsets.UTF_8), changes);
        }
        built.replace(snap, changes);

        String why = "seed " + seed + " keepRaw " + keepRaw;
        assertEquals(applied.entries(), built.entries(), why);
        assertEquals(applied.rowCount(), built.rowCount(), why);
        assertEquals(applied.hashSum(), built.hashSum(), why);
        Map<String, long[]> want = new HashMap<>();
        Map<String, byte[]> wantRaw = new HashMap<>();
        applied.hashTable().forEach((k, h, raw) -> {
          want.put(k, new long[] {h});
          wantRaw.put(k, raw);
        });
        Map<String, byte[]> gotRaw = new HashMap<>();
        built.hashTable().forEach((k, h, raw) -> {
          assertTrue(want.containsKey(k), why + " key " + k);
          assertEquals(want.get(k)[0], h, why + " key " + k);
          gotRaw.put(k, raw);
        });
        assertEquals(want.keySet(), gotRaw.keySet(), why);
        for (Map.Entry<String, byte[]> e : wantRaw.entrySet()) {
          assertArrayEquals(e.getValue(), gotRaw.get(e.getKey()), why + " key " + e.getKey());
        }
      }
    }
  }

  @Test
  void aKeyWithoutViewPrefixIsRefused() {
    SnapshotRows rows = new SnapshotRows();
    byte[] noPrefix = "events\\|1{}".getBytes(StandardCharsets.UTF_8);
    assertFalse(rows.add(noPrefix, 0, noPrefix.length - 2, noPrefix.length - 2, 2));
    byte[] escaped = "ev\\\\|1{}".getBytes(StandardCharsets.UTF_8);
    assertTrue(rows.add(escaped, 0, escaped.length - 2, escaped.length - 2, 2));
    assertEquals(1, rows.count());
  }

  @Test
  void orderIsStableByBucket() {
    Random r = new Random(7);
    for (int bits : new int[] {1, 5, 11, 12, 21, 23}) {
      int n = 50_000;
      int[] bucket = new int[n];
      for (int i = 0; i < n; i++) {
        bucket[i] = r.nextInt(1 << bits);
      }
      int[] o = RowBatch.order(bucket, n, bits);
      boolean[] seen = new boolean[n];
      for (int i = 0; i < n; i++) {
        assertFalse(seen[o[i]], "bits " + bits);
        seen[o[i]] = true;
        if (i > 0) {
          int a = bucket[o[i - 1]];
          int b = bucket[o[i]];
          assertTrue(a < b || (a == b && o[i - 1] < o[i]), "bits " + bits + " at " + i);
        }
      }
    }
  }

  @Test
  void concurrentHashMapSlotBits() {
    // new ConcurrentHashMap<>(n) sizes its table to the power of two at or above 1 + n/0.75.
    assertEquals(4, RowBatch.concurrentHashMapSlotBits(11)); // 15.67 → 16
    assertEquals(5, RowBatch.concurrentHashMapSlotBits(12)); // 17 → 32
    assertEquals(21, RowBatch.concurrentHashMapSlotBits(1_000_000));
    assertEquals(21, RowBatch.concurrentHashMapSlotBits(786_432)); // 1,048,577
    assertEquals(20, RowBatch.concurrentHashMapSlotBits(786_431)); // 1,048,575.67
  }
}
