package io.statecast.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The open-addressing table against a HashMap on the same random operations. */
class HashTableTest {
  @Test
  void behavesAsAMap() {
    long seed = System.nanoTime();
    Random r = new Random(seed);
    HashTable t = new HashTable();
    Map<String, Long> m = new HashMap<>();
    for (int op = 0; op < 200_000; op++) {
      String k = Integer.toString(r.nextInt(5_000));
      switch (r.nextInt(3)) {
        case 0, 1 -> {
          long h = r.nextLong();
          t.put(k, h);
          m.put(k, h);
        }
        default -> {
          t.remove(k);
          m.remove(k);
        }
      }
      if (op % 997 == 0) {
        assertEquals(m.size(), t.size(), "seed " + seed);
        for (Map.Entry<String, Long> e : m.entrySet()) {
          assertEquals(true, t.contains(e.getKey()), "seed " + seed + " key " + e.getKey());
          assertEquals((long) e.getValue(), t.get(e.getKey()), "seed " + seed);
        }
        assertEquals(new HashSet<>(m.keySet()), new HashSet<>(t.keyList()), "seed " + seed);
      }
    }
    long sum = 0;
    for (long h : m.values()) {
      sum += h;
    }
    assertEquals(sum, t.sum(), "seed " + seed);
    List<String> visited = new ArrayList<>();
    t.forEach((k, h, raw) -> visited.add(k));
    assertEquals(m.size(), visited.size());
  }

  @Test
  void keysInAnotherTablesSlotOrderDoNotCluster() {
    // A state file lists a view's rows in its table's slot order, and the load inserts them
    // in that order into a new, growing table.
    HashTable a = new HashTable(true);
    int n = 200_000;
    for (int i = 0; i < n; i++) {
      a.put(Integer.toString(i), i, new byte[0]);
    }
    HashTable b = new HashTable(true);
    for (String k : a.keyList()) {
      b.put(k, 0, null);
      if (b.probes > 20L * n) {
        throw new AssertionError("inserting in another table's slot order clusters: " + b.probes + " probes after "
            + b.size() + " keys");
      }
    }
    assertEquals(n, b.size());
  }
}
