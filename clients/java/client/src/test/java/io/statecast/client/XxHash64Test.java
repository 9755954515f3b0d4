package io.statecast.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** Vectors computed with github.com/cespare/xxhash/v2 and schemas/record.RowHash. */
class XxHash64Test {
  private static long h(String s) {
    return XxHash64.hash(s.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void matchesTheGoHash() {
    assertEquals(0xef46db3751d8e999L, h(""));
    assertEquals(0xd24ec4f1a98c6e5bL, h("a"));
    assertEquals(0x44bc2cf5ad770999L, h("abc"));
    assertEquals(0xd2d02f08cf7cfd4aL, h("12345678"));
    assertEquals(0x748909fcc0267565L, h("123456789012345678901234567890ab"));
    assertEquals(0x80e16fc1219fd80dL, h("statecast|".repeat(20)));
  }

  @Test
  void streamingEqualsTheWholeHashForEverySplit() {
    java.util.Random rnd = new java.util.Random(7);
    for (int len : new int[] {0, 1, 7, 31, 32, 33, 64, 100, 1000}) {
      byte[] b = new byte[len];
      rnd.nextBytes(b);
      long want = XxHash64.hash(b, 0, len);
      for (int trial = 0; trial < 20; trial++) {
        XxHash64.Streaming s = new XxHash64.Streaming();
        int off = 0;
        while (off < len) {
          int n = Math.min(len - off, rnd.nextInt(40));
          s.update(b, off, n);
          off += n;
        }
        assertEquals(want, s.digest(), "length " + len + " trial " + trial);
      }
    }
  }

  @Test
  void rowHashIsOverTheRecordKeyAZeroByteAndTheValue() {
    StatecastClient c = StatecastClient.builder().addresses("127.0.0.1:1").stream("s").build();
    try {
      View<String> v = c.rawView("events");
      assertEquals(0x6cd5f58ebf41b9b4L, v.rowHash(Keys.join("a|b"), "{\"id\":1}".getBytes(StandardCharsets.UTF_8)));
    } finally {
      c.close();
    }
  }
}
