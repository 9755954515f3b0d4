package io.statecast.client;

import static io.statecast.client.FakePlayer.epochEnd;
import static io.statecast.client.FakePlayer.position;
import static io.statecast.client.FakePlayer.row;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import statecast.v1.PlayerOuterClass.Hello;
import statecast.v1.PlayerOuterClass.Progress;
import statecast.v1.PlayerOuterClass.SubscribeResponse;
import com.google.protobuf.UnknownFieldSet;
import statecast.v1.PlayerOuterClass.Batch;
import statecast.v1.PlayerOuterClass.SnapshotEnd;
import statecast.v1.PlayerOuterClass.SnapshotBegin;

class StatecastClientTest {
  /** A light type: unknown members are ignored. */
  record Event(long id, String sport) {}

  private FakePlayer player;
  private StatecastClient client;

  @BeforeEach
  void setUp() throws Exception {
    player = new FakePlayer();
  }

  @AfterEach
  void tearDown() throws Exception {
    if (client != null) {
      client.close();
    }
    player.close();
  }

  private StatecastClient.Builder builder() {
    return StatecastClient.builder().addresses(player.addr()).stream("s").service("test")
        .instanceId("i-1").backoff(Duration.ofMillis(5), Duration.ofMillis(50));
  }

  private static String ev(long id, String sport) {
    return "{\"id\":" + id + ",\"sport\":\"" + sport + "\",\"name\":\"n\"}";
  }

  private static void await(CompletableFuture<?> f) throws Exception {
    f.get(20, TimeUnit.SECONDS);
  }

  @Test
  void helloThenSnapshotThenTransactionsAppliedWhole() throws Exception {
    client = builder().build();
    View<Event> events = client.view("events", Event.class);
    events.addIndex("sport", e -> List.of(e.sport()));
    client.start();
    FakePlayer.Sub s = player.next();
    Hello h = s.hello();
    assertEquals("s", h.getStream());
    assertEquals(List.of("events"), h.getViewsList());
    assertFalse(h.hasResumeIndex(), "a new client asks for a snapshot");
    assertEquals(StatecastClient.PROTOCOL_VERSION, h.getProtocolVersion());
    assertEquals(4 << 20, h.getMaxMessageBytes());
    assertEquals("i-1", h.getClientId());
    assertEquals("test", h.getService());

    s.snapshot(10, row(3, "events", "1", ev(1, "football"), false), row(7, "events", "2", ev(2, "tennis"), false));
    await(client.awaitReady());
    assertEquals(10, client.appliedIndex());
    assertEquals(new Event(1, "football"), events.get("1"));
    assertEquals(Set.of("1"), events.keysBy("sport", "football"));
    s.awaitAck(10);

    // A transaction spanning two batches is invisible until its position entry.
    CompletableFuture<Void> rw = client.awaitFor("0/20");
    s.batch(row(11, "events", "1", ev(1, "tennis"), true), row(12, "events", "3", ev(3, "golf"), true));
    s.awaitAck(12);
    assertEquals(new Event(1, "football"), events.get("1"));
    assertNull(events.get("3"));
    assertEquals(10, client.appliedIndex(), "the resume index stays at the last publication");
    assertFalse(rw.isDone());
    s.batch(row(13, "events", "2", null, true), position(15, "0/20"));
    await(rw);
    assertEquals(new Event(1, "tennis"), events.get("1"));
    assertEquals(new Event(3, "golf"), events.get("3"));
    assertNull(events.get("2"));
    assertEquals(15, client.appliedIndex());
    assertEquals(Set.of("1"), events.keysBy("sport", "tennis"));
    assertEquals(Set.of(), events.keysBy("sport", "football"), "empty index sets are dropped");
  }

  @Test
  void aSnapshotBatchTheInPlaceReadingDeclinesIsReadTheSameWay() throws Exception {
    client = builder().build();
    View<String> raw = client.rawView("events");
    client.start();
    FakePlayer.Sub s = player.next();
    s.hello();
    s.send(SubscribeResponse.newBuilder().setSnapshotBegin(SnapshotBegin.newBuilder().setIndex(9)).setHeadIndex(9));
    s.batch(row(2, "events", "a", "{\"v\":1}", false), row(3, "events", "b", "{}", false));
    // A field the in-place reading does not know: the generated parser reads this frame.
    s.send(SubscribeResponse.newBuilder()
        .setBatch(Batch.newBuilder().addEntries(row(5, "events", "a", null, false)).addEntries(row(6, "events", "c", "{}", false)))
        .setUnknownFields(UnknownFieldSet.newBuilder()
            .addField(99, UnknownFieldSet.Field.newBuilder().addVarint(1).build()).build()));
    s.send(SubscribeResponse.newBuilder().setSnapshotEnd(SnapshotEnd.newBuilder().setIndex(9)).setHeadIndex(9));
    await(client.awaitReady());
    assertEquals(Map.of("b", "{}", "c", "{}"), raw.entries());
  }

  @Test
  void resumesAfterAnUnavailablePlayerWithItsIndexAndTopic() throws Exception {
    client = builder().build();
    View<String> raw = client.rawView("events");
    client.start();
    FakePlayer.Sub s = player.next();
    s.hello();
    s.snapshot(5, row(5, "events", "a", "{}", false));
    await(client.awaitReady());
    s.batch(row(8, "events", "b", "{\"x\":1}", false));
    s.awaitAck(8);
    s.fail(Status.UNAVAILABLE.withDescription("player shutting down"));
    FakePlayer.Sub s2 = player.next();
    Hello h = s2.hello();
    assertTrue(h.hasResumeIndex());
    assertEquals(8, h.getResumeIndex());
    assertEquals(FakePlayer.TOPIC, h.getTopicId());
    s2.send(SubscribeResponse.newBuilder().setProgress(Progress.newBuilder().setIndex(9)));
    s2.batch(row(12, "events", "c", "{}", false));
    s2.awaitAck(12);
    assertEquals("{\"x\":1}", raw.get("b"));
    assertEquals(3, raw.size());
    assertEquals(1, client.reconnects());
  }

  @Test
  void anEpochHashMismatchResubscribesForASnapshot() throws Exception {
    client = builder().build();
    View<String> raw = client.rawView("events");
    client.start();
    FakePlayer.Sub s = player.next();
    s.hello();
    s.snapshot(5, row(4, "events", "a", "{}", false), row(5, "events", "b", "{}", false));
    await(client.awaitReady());
    long sum = raw.rowHash("a", "{}".getBytes(StandardCharsets.UTF_8)) + raw.rowHash("b", "{}".getBytes(StandardCharsets.UTF_8));
    s.batch(epochEnd(6, "events", 2, String.format("%016x", sum)));
    s.awaitAck(6);
    s.batch(epochEnd(7, "events", 2, String.format("%016x", sum + 1)));
    FakePlayer.Sub s2 = player.next();
    assertFalse(s2.hello().hasResumeIndex(), "a mismatch asks for a snapshot");
    assertEquals(0, player.subs.size(), "the matching epoch end kept the first subscription");
    s2.snapshot(9, row(4, "events", "a", "{}", false));
    s2.awaitAck(9);
    assertEquals(Map.of("a", "{}"), raw.entries());
    assertEquals(1, client.resyncs());
  }

  @Test
  void selectionsGoInTheHelloAndSkipEpochChecks() throws Exception {
    client = builder().build();
    View<String> tennis = client.rawView("events",
        Selection.builder().filter("sport == \"tennis\"").columns("id", "sport").build());
    View<String> mine = client.rawView("markets", Selection.builder().shard(2, 16).build());
    View<String> whole = client.rawView("sports");
    assertEquals("sport == \"tennis\" columns id,sport", tennis.selection().orElseThrow().toString());
    assertTrue(whole.selection().isEmpty());
    client.start();
    FakePlayer.Sub s = player.next();
    Hello h = s.hello();
    assertEquals(StatecastClient.SELECTIONS_PROTOCOL_VERSION, h.getProtocolVersion());
    assertEquals(2, h.getSelectionsCount());
    assertEquals("events", h.getSelections(0).getView());
    assertEquals("sport == \"tennis\"", h.getSelections(0).getFilter());
    assertEquals(List.of("id", "sport"), h.getSelections(0).getColumnsList());
    assertEquals(0, h.getSelections(0).getShardCount());
    assertEquals("markets", h.getSelections(1).getView());
    assertEquals(2, h.getSelections(1).getShardIndex());
    assertEquals(16, h.getSelections(1).getShardCount());
    s.snapshot(5, row(4, "events", "a", "{\"id\":1,\"sport\":\"tennis\"}", false));
    await(client.awaitReady());
    // The whole view's epoch does not describe the part held: no resync. A tombstone of a
    // key the client does not hold (a recovery's move-out) is a no-op.
    s.batch(epochEnd(6, "events", 1000, "0123456789abcdef"), row(7, "events", "zz", null, false));
    s.awaitAck(7);
    assertEquals(0, client.resyncs());
    assertEquals(Map.of("a", "{\"id\":1,\"sport\":\"tennis\"}"), tennis.entries());
  }

  @Test
  void aSelectionIsCheckedWhenBuilt() {
    assertThrows(IllegalArgumentException.class, () -> Selection.builder().shard(16, 16));
    assertThrows(IllegalArgumentException.class, () -> Selection.builder().shard(0, 0));
    assertThrows(IllegalArgumentException.class, () -> Selection.builder().columns("id", "id"));
    assertEquals(Selection.builder().filter(" a == 1 ").build(), Selection.builder().filter("a == 1").build());
  }

  @Test
  void aRefusedViewStopsTheClientNamingTheView() throws Exception {
    client = builder().build();
    client.rawView("events");
    client.start();
    FakePlayer.Sub s = player.next();
    s.hello();
    s.fail(Status.NOT_FOUND.withDescription("player: unknown view: events is not carried by stream s"));
    ExecutionException e = assertThrows(ExecutionException.class, () -> client.awaitReady().get(20, TimeUnit.SECONDS));
    StatecastException se = assertInstanceOf(StatecastException.class, e.getCause());
    assertEquals("events", se.view());
    assertTrue(se.permanent());
    assertTrue(se.getMessage().contains("NOT_FOUND"), se.getMessage());
  }

  @Test
  void listenersSeeEachKeysChangesInOrder() throws Exception {
    client = builder().build();
    View<String> raw = client.rawView("events");
    List<String> seen = new ArrayList<>();
    raw.addListener((key, o, n) -> {
      synchronized (seen) {
        seen.add(key + ":" + o + "->" + n);
      }
    });
    client.start();
    FakePlayer.Sub s = player.next();
    s.hello();
    s.snapshot(1, row(1, "events", "k", "1", false));
    for (int i = 2; i <= 50; i++) {
      s.batch(row(i, "events", "k", String.valueOf(i), false));
    }
    s.batch(row(51, "events", "k", null, false));
    s.awaitAck(51);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (System.nanoTime() < deadline) {
      synchronized (seen) {
        if (seen.size() == 51) {
          break;
        }
      }
      Thread.sleep(10);
    }
    synchronized (seen) {
      assertEquals(51, seen.size(), seen.toString());
      assertEquals("k:null->1", seen.get(0));
      for (int i = 1; i < 50; i++) {
        assertEquals("k:" + i + "->" + (i + 1), seen.get(i));
      }
      assertEquals("k:50->null", seen.get(50));
    }
  }

  @Test
  void closeEndsEveryThreadOfTheClient() throws Exception {
    client = builder().build();
    client.rawView("events");
    client.start();
    player.next().hello();
    client.close();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      String n = t.getName();
      assertFalse(t.isAlive() && (n.startsWith("statecast-") || n.startsWith("globalEventExecutor")),
          "thread left after close: " + n);
    }
    assertThrows(ExecutionException.class, () -> client.awaitReady().get(1, TimeUnit.SECONDS));
  }

  @Test
  void theOkHttpTransportCarriesTheSameConversationAndLeavesNoThread() throws Exception {
    client = builder().transport(StatecastClient.Transport.OKHTTP).build();
    View<String> events = client.rawView("events");
    client.start();
    FakePlayer.Sub s = player.next();
    assertEquals("s", s.hello().getStream());
    s.snapshot(10, row(3, "events", "1", ev(1, "football"), false));
    await(client.awaitReady());
    s.batch(row(11, "events", "1", ev(1, "tennis"), true), position(12, "0/20"));
    await(client.awaitFor("0/20"));
    assertEquals(ev(1, "tennis"), events.get("1"));
    s.awaitAck(12);
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      assertFalse(t.isAlive() && t.getName().startsWith("statecast-s-net-"),
          "Netty's event loop started, so the connection is not OkHttp's: " + t.getName());
    }
    client.close();
    // gRPC's shared threads are the in-process player's too (its destroyer of shared
    // resources among them): the driver of the conformance suite, a client alone in its
    // process, checks that none is left.
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      String n = t.getName();
      assertFalse(t.isAlive() && (n.startsWith("statecast-") || n.startsWith("grpc-okhttp") || n.startsWith("grpc-timer")),
          "thread left after close: " + n);
    }
  }

  @Test
  void theOkHttpTransportIsRefusedWithAMany() {
    try (Many m = new Many()) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> builder().transport(StatecastClient.Transport.OKHTTP).many(m).build());
      assertTrue(e.getMessage().contains("OKHTTP") && e.getMessage().contains("Many"), e.getMessage());
    }
  }

  @Test
  void builderNamesWhatIsMissing() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> StatecastClient.builder().stream("s").build());
    assertTrue(e.getMessage().startsWith("addresses"), e.getMessage());
    StatecastClient c = StatecastClient.builder().addresses("x:1").stream("s").build();
    try {
      IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> c.rawView("bad|name"));
      assertTrue(bad.getMessage().contains("bad|name"));
      assertThrows(IllegalStateException.class, c::start, "no view registered");
    } finally {
      c.close();
    }
  }

  @Test
  void clientsOfOneManyAreChannelsOfOneStream() throws Exception {
    try (Many many = new Many()) {
      StatecastClient a = builder().instanceId("a").many(many).build();
      StatecastClient b = builder().instanceId("b").many(many).build();
      try {
        View<String> ra = a.rawView("events");
        View<String> rb = b.rawView("events");
        a.start();
        FakePlayer.Sub sa = player.next();
        assertEquals("a", sa.hello().getClientId());
        b.start();
        FakePlayer.Sub sb = player.next();
        assertEquals("b", sb.hello().getClientId());
        sa.snapshot(5, row(5, "events", "x", "{\"a\":1}", false));
        sb.snapshot(5, row(4, "events", "y", "{\"b\":1}", false));
        await(a.awaitReady());
        await(b.awaitReady());
        sa.batch(row(8, "events", "x2", "{}", false));
        sa.awaitAck(8);
        assertEquals(Set.of("x", "x2"), ra.entries().keySet());
        assertEquals(Set.of("y"), rb.entries().keySet());
        // Far more messages than the Many reads ahead of its clients: each handled one
        // lets it read the next.
        for (int i = 0; i < 200; i++) {
          sb.batch(row(1000 + i, "events", "n" + i, "{}", false));
        }
        sb.awaitAck(1199);
        assertEquals(201, rb.size());
        assertEquals(1, player.subscribeManyCalls.get(), "one SubscribeMany stream for both clients");
        assertEquals(0, player.subscribeCalls.get());

        // A channel's end is its client's alone: a resumes on a new channel, b is untouched.
        sa.fail(Status.UNAVAILABLE.withDescription("player shutting down"));
        FakePlayer.Sub sa2 = player.next();
        Hello h = sa2.hello();
        assertEquals(8, h.getResumeIndex());
        assertEquals(1, a.reconnects());
        assertEquals(0, b.reconnects());
        sb.batch(row(1200, "events", "y2", "{}", false));
        sb.awaitAck(1200);
        assertTrue(rb.entries().containsKey("y2"));

        // Closing a client closes its channel only.
        b.close();
        assertTrue(player.closedChannels.poll(20, TimeUnit.SECONDS) != null, "b's channel closed");
        sa2.batch(row(12, "events", "x3", "{}", false));
        sa2.awaitAck(12);
        assertEquals(Set.of("x", "x2", "x3"), ra.entries().keySet());
      } finally {
        a.close();
        b.close();
      }
    }
  }

  @org.junit.jupiter.api.RepeatedTest(10)
  void closeOfAManyEndsItsThreads() throws Exception {
    Many many = new Many();
    StatecastClient a = builder().instanceId("a").many(many).build();
    a.rawView("events");
    a.start();
    FakePlayer.Sub s = player.next();
    s.hello();
    s.snapshot(5, row(5, "events", "x", "{}", false));
    await(a.awaitReady());
    a.close();
    many.close();
    assertTrue(many.threadsEnded(), "the Many's threads ended");
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      String n = t.getName();
      assertFalse(t.isAlive() && (n.startsWith("statecast-") || n.startsWith("globalEventExecutor")),
          "thread left after close: " + n);
    }
  }
}
