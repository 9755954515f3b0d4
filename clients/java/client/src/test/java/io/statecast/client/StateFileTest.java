package io.statecast.client;

import static io.statecast.client.FakePlayer.position;
import static io.statecast.client.FakePlayer.row;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import statecast.v1.PlayerOuterClass.Hello;

class StateFileTest {
  @TempDir Path dir;

  /** One row read back. */
  record Row(String key, byte[] raw) {}

  /** A file's content and every held view's rows in lists. */
  record Read(StateFile.Content content, Map<String, List<Row>> rows) {
    long index() {
      return content.index();
    }

    byte[] topic() {
      return content.topic();
    }

    Position position() {
      return content.position();
    }
  }

  @SuppressWarnings("unchecked")
  static Read read(byte[] b, String stream, byte[] key, Map<String, String> views) throws StateFile.BadFile {
    Map<String, List<Row>> rows = new java.util.HashMap<>();
    List<Row>[] cur = new List[1];
    StateFile.Content c = StateFile.read(b, stream, key, views, new StateFile.Sink() {
      @Override
      public void view(String view, int n) {
        cur[0] = new java.util.ArrayList<>(n);
        rows.put(view, cur[0]);
      }

      @Override
      public void row(String k, byte[] raw, long hash) {
        cur[0].add(new Row(k, raw));
      }
    });
    return new Read(c, rows);
  }
  private FakePlayer player;

  @BeforeEach
  void setUp() throws Exception {
    player = new FakePlayer();
  }

  @AfterEach
  void tearDown() throws Exception {
    player.close();
  }

  private StatecastClient.Builder builder() {
    return StatecastClient.builder().addresses(player.addr()).stream("s").instanceId("i-1")
        .backoff(Duration.ofMillis(5), Duration.ofMillis(50)).stateDir(dir).persistInterval(Duration.ofHours(1));
  }

  /** A client that takes a snapshot, a transaction and a deletion, then closes (which writes the file). */
  private void firstRun(StatecastClient.Builder b, Selection sel) throws Exception {
    try (StatecastClient c = b.build()) {
      c.rawView("events", sel);
      c.start();
      FakePlayer.Sub s = player.next();
      assertFalse(s.hello().hasResumeIndex(), "no file yet: a snapshot");
      s.snapshot(10, row(3, "events", "1", "{\"id\":1}", false), row(7, "events", "2", "{\"id\":2}", false),
          row(9, "events", "3", "{\"id\":3}", false));
      c.awaitReady().get(20, TimeUnit.SECONDS);
      s.batch(row(11, "events", "1", "{\"id\":1,\"v\":2}", true), row(12, "events", "2", null, true),
          position(13, "0/1A"));
      s.awaitAck(13);
    }
  }

  @Test
  void aRestartResumesFromTheFileWithItsRowsIndexTopicAndPosition() throws Exception {
    firstRun(builder(), null);
    assertTrue(Files.exists(dir.resolve(StateFile.NAME)), "close writes the state file");

    List<String> seen = new CopyOnWriteArrayList<>();
    try (StatecastClient c = builder().build()) {
      View<String> ev = c.rawView("events");
      ev.addListener((k, o, n) -> seen.add(k + "=" + n));
      c.start();
      FakePlayer.Sub s = player.next();
      Hello h = s.hello();
      assertTrue(h.hasResumeIndex(), "the file's index is resumed from");
      assertEquals(13, h.getResumeIndex());
      assertEquals(FakePlayer.TOPIC, h.getTopicId());
      assertEquals(Map.of("1", "{\"id\":1,\"v\":2}", "3", "{\"id\":3}"), ev.entries());
      assertEquals(Position.parseLsn("0/1A"), c.position().lsn());
      long sum = 0;
      for (Map.Entry<String, String> e : ev.entries().entrySet()) {
        sum += ev.rowHash(e.getKey(), e.getValue().getBytes(StandardCharsets.UTF_8));
      }
      assertEquals(sum, ev.hashSum(), "the loaded rows' hashes are the record format's row hashes");
      assertEquals(13, c.appliedIndex());
      c.awaitFor("0/1A").get(20, TimeUnit.SECONDS);
      // The player resumes after 13: the next transaction applies on the loaded rows.
      s.batch(row(14, "events", "3", null, true), position(15, "0/1B"));
      c.awaitFor("0/1B").get(20, TimeUnit.SECONDS);
      assertEquals(Map.of("1", "{\"id\":1,\"v\":2}"), ev.entries());
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (seen.size() < 3 && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      assertTrue(seen.containsAll(List.of("1={\"id\":1,\"v\":2}", "3={\"id\":3}", "3=null")),
          "the loaded rows are announced, then the change: " + seen);
    }
    // The second close wrote the later state.
    Read c = read(StateFile.bytesOf(dir), "s", null, Map.of("events", ""));
    assertEquals(15, c.index());
    assertEquals(1, c.rows().get("events").size());
  }

  @Test
  void aCorruptFileIsIgnoredAndTheClientTakesASnapshot() throws Exception {
    firstRun(builder(), null);
    byte[] b = StateFile.bytesOf(dir);
    b[b.length / 2] ^= 1;
    Files.write(dir.resolve(StateFile.NAME), b);
    try (StatecastClient c = builder().build()) {
      c.rawView("events");
      c.start();
      FakePlayer.Sub s = player.next();
      assertFalse(s.hello().hasResumeIndex(), "a corrupt file: a snapshot");
      assertEquals(-1, c.appliedIndex());
    }
    StateFile.BadFile e = assertThrows(StateFile.BadFile.class,
        () -> read(b, "s", null, Map.of("events", "")));
    assertTrue(e.getMessage().contains("checksum"), e.getMessage());
  }

  @Test
  void aFileOfAnotherSelectionOrStreamOrWithoutAViewIsNotResumedFrom() throws Exception {
    firstRun(builder(), Selection.builder().filter("id > 1").columns("id", "a").build());
    byte[] b = StateFile.bytesOf(dir);
    assertEquals(13, read(b, "s", null, Map.of("events", "id > 1 columns a,id")).index());
    StateFile.BadFile sel = assertThrows(StateFile.BadFile.class, () -> read(b, "s", null, Map.of("events", "")));
    assertTrue(sel.getMessage().contains("view events was saved with selection \"id > 1 columns a,id\""), sel.getMessage());
    StateFile.BadFile st = assertThrows(StateFile.BadFile.class,
        () -> read(b, "t", null, Map.of("events", "id > 1 columns a,id")));
    assertTrue(st.getMessage().contains("file of stream \"s\", client of stream \"t\""), st.getMessage());
    StateFile.BadFile missing = assertThrows(StateFile.BadFile.class,
        () -> read(b, "s", null, Map.of("events", "id > 1 columns a,id", "markets", "")));
    assertTrue(missing.getMessage().contains("view markets is not in the file"), missing.getMessage());

    try (StatecastClient c = builder().build()) {
      c.rawView("events"); // the whole view now
      c.start();
      assertFalse(player.next().hello().hasResumeIndex(), "another selection: a snapshot");
    }
  }

  @Test
  void aKeyedFileLoadsOnlyUnderItsKey() throws Exception {
    byte[] key = "0123456789abcdef0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
    firstRun(builder().stateKey(key), null);
    byte[] b = StateFile.bytesOf(dir);
    assertEquals("SCSTATK5", new String(b, 0, 8, StandardCharsets.US_ASCII));
    assertEquals(13, read(b, "s", key, Map.of("events", "")).index());
    byte[] other = key.clone();
    other[0] ^= 1;
    StateFile.BadFile wrong = assertThrows(StateFile.BadFile.class, () -> read(b, "s", other, Map.of("events", "")));
    assertTrue(wrong.auth && wrong.getMessage().contains("MAC does not verify"), wrong.getMessage());
    StateFile.BadFile none = assertThrows(StateFile.BadFile.class, () -> read(b, "s", null, Map.of("events", "")));
    assertFalse(none.auth);
    assertTrue(none.getMessage().contains("has none to verify it"), none.getMessage());
    // A checksummed file is refused by a client with a key: anyone could have written it.
    StateFile.BadFile unkeyed = assertThrows(StateFile.BadFile.class, () -> read(
        StateFile.encodeForTest("s", null, 1, new byte[0], Position.UNKNOWN, false, List.of()), "s", key, Map.of()));
    assertTrue(unkeyed.auth);
    assertThrows(IllegalArgumentException.class, () -> builder().stateKey(new byte[31]).build());
  }

  @Test
  void thePeriodicWriteWaitsForTheListenersAndSkipsADistrustedState() throws Exception {
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    try (StatecastClient c = builder().persistInterval(Duration.ofMillis(20)).build()) {
      c.rawView("events").addListener((k, o, n) -> {
        try {
          release.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      });
      c.start();
      FakePlayer.Sub s = player.next();
      s.hello();
      s.snapshot(5, row(5, "events", "a", "{}", false));
      c.awaitReady().get(20, TimeUnit.SECONDS);
      Thread.sleep(200);
      assertEquals(0, c.stateWrites(), "a listener has not run the snapshot's change: no file");
      assertFalse(Files.exists(dir.resolve(StateFile.NAME)));
      release.countDown();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (c.stateWrites() == 0 && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      assertTrue(c.stateWrites() > 0, "written once the listener ran");
      assertEquals(5, read(StateFile.bytesOf(dir), "s", null, Map.of("events", "")).index());
    }
  }

  @Test
  void theFormatIsTheGoClients() throws Exception {
    // Bytes of a format-5 file as cacheclient's writeState lays them out (its doc comment):
    // stream "s", topic "T", index 7, a position at 0/10 with "b" behind at 0/8, one view
    // "v" of selection "" with row "k" = "{}".
    byte[] body = {'S', 'C', 'S', 'T', 'A', 'T', 'E', '5', 1, 's', 1, 'T', 14, 3, 16, 0, 1, 1, 'b', 8, 1, 1, 'v', 0, 1,
        1, 'k', 2, '{', '}'};
    long h = XxHash64.hash(body, 0, body.length);
    byte[] file = java.util.Arrays.copyOf(body, body.length + 8);
    for (int i = 0; i < 8; i++) {
      file[body.length + i] = (byte) (h >>> (56 - 8 * i));
    }
    // cacheclient's TestStateFileGolden pins the Go client's writeState to the same bytes.
    assertEquals("5343535441544535017301540e031000010162080101760001016b027b7d24ac2843eca1eac0",
        java.util.HexFormat.of().formatHex(file));
    Read c = read(file, "s", null, Map.of("v", ""));
    assertEquals(7, c.index());
    assertEquals("T", new String(c.topic(), StandardCharsets.UTF_8));
    assertEquals(0x10, c.position().lsn());
    assertEquals(Map.of("b", 8L), c.position().behind());
    assertEquals("k", c.rows().get("v").get(0).key());
    HashTable t = new HashTable(true);
    t.put("k", 0, "{}".getBytes(StandardCharsets.UTF_8));
    HashTable.Rows r = t.rows();
    byte[] again = StateFile.encodeForTest("s", null, 7, "T".getBytes(StandardCharsets.UTF_8), c.position(), true,
        List.of(new StateFile.ViewRows("v", "", r.keys(), r.raws(), r.size())));
    assertEquals(java.util.HexFormat.of().formatHex(file), java.util.HexFormat.of().formatHex(again),
        "written byte for byte as the Go client writes it");
    assertNull(read(again, "s", null, Map.of()).rows().get("v"), "views the client does not hold are skipped");
  }

  @Test
  void withAPlayerThatSendsNoHeadIndexAResumedClientIsReadyOnceNoFrameCameForReadyIdle() throws Exception {
    firstRun(builder(), null);
    try (StatecastClient c = builder().readyIdle(Duration.ofMillis(1000)).build()) {
      c.rawView("events");
      c.start();
      FakePlayer.Sub s = player.next();
      assertEquals(13, s.hello().getResumeIndex());
      // Frames without a head index, closer together than readyIdle: still catching up.
      for (int i = 0; i < 8; i++) {
        s.send(statecast.v1.PlayerOuterClass.SubscribeResponse.newBuilder().setBatch(
            statecast.v1.PlayerOuterClass.Batch.newBuilder().addEntries(row(14 + i, "events", "k" + i, "{}", false))));
        Thread.sleep(100);
        assertFalse(c.isReady(), "ready while frames keep coming, after frame " + i);
      }
      c.awaitReady().get(20, TimeUnit.SECONDS);
      assertEquals(21, c.appliedIndex());
    }
  }

  @Test
  void aWriteACrashInterruptedLeavesNothingBehindAtTheNextStart() throws Exception {
    firstRun(builder(), null);
    Path left = Files.createTempFile(dir, StateFile.NAME + ".tmp", "");
    Files.write(left, new byte[] {1, 2, 3});
    try (StatecastClient c = builder().build()) {
      c.rawView("events");
      c.start();
      assertEquals(13, player.next().hello().getResumeIndex(), "the state file itself is still resumed from");
      assertFalse(Files.exists(left), "the temporary file of a write that did not finish is removed");
    }
    assertThrows(IllegalArgumentException.class,
        () -> StatecastClient.builder().addresses("a:1").stream("s").stateKey(new byte[32]).build(),
        "a state key without a state directory");
    assertThrows(IllegalArgumentException.class, () -> builder().persistInterval(Duration.ZERO).build());
  }
}
