package io.statecast.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Timestamp;
import com.google.protobuf.UnknownFieldSet;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import statecast.v1.PlayerOuterClass.Batch;
import statecast.v1.PlayerOuterClass.ChannelEnd;
import statecast.v1.PlayerOuterClass.Entry;
import statecast.v1.PlayerOuterClass.Progress;
import statecast.v1.PlayerOuterClass.SubscribeManyResponse;
import statecast.v1.PlayerOuterClass.SubscribeResponse;

/**
 * The in-place reading of a batch against the generated parser, on random and damaged
 * frames: whatever it takes, the generated parser takes too and reads the same entries from.
 */
class FramesTest {
  private static ByteString bytes(Random r, int max) {
    byte[] b = new byte[r.nextInt(max + 1)];
    r.nextBytes(b);
    return ByteString.copyFrom(b);
  }

  private static final String[] TEXTS = {"", "events", "é日本", "markets.v-1", "0/16B3748"};

  private static Entry entry(Random r) {
    Entry.Builder e = Entry.newBuilder();
    if (r.nextBoolean()) e.setIndex(r.nextInt(3) == 0 ? r.nextLong() : r.nextInt(1_000_000));
    if (r.nextBoolean()) e.setKey(bytes(r, 40));
    if (r.nextBoolean()) e.setValue(bytes(r, 200));
    if (r.nextInt(4) == 0) e.setTombstone(true);
    if (r.nextBoolean()) e.setView(TEXTS[r.nextInt(TEXTS.length)]);
    if (r.nextBoolean()) e.setKindValue(r.nextInt(8) - 1);
    if (r.nextBoolean()) e.setEpoch(r.nextLong());
    if (r.nextBoolean()) e.setSourceTime(Timestamp.newBuilder().setSeconds(r.nextLong()).setNanos(r.nextInt(1_000_000_000)));
    if (r.nextBoolean()) e.setSourceLsn(TEXTS[r.nextInt(TEXTS.length)]);
    if (r.nextInt(4) == 0) e.setTxn(true);
    if (r.nextInt(5) == 0) {
      e.setUnknownFields(UnknownFieldSet.newBuilder()
          .addField(11 + r.nextInt(1000), UnknownFieldSet.Field.newBuilder().addVarint(r.nextLong())
              .addLengthDelimited(bytes(r, 10)).addFixed32(r.nextInt()).addFixed64(r.nextLong()).build())
          .build());
    }
    return e.build();
  }

  private static byte[] frame(Random r) {
    SubscribeResponse.Builder m = SubscribeResponse.newBuilder();
    switch (r.nextInt(6)) {
      case 0 -> m.setProgress(Progress.newBuilder().setIndex(r.nextInt(100)));
      default -> {
        Batch.Builder b = Batch.newBuilder();
        int n = r.nextInt(20);
        for (int i = 0; i < n; i++) {
          b.addEntries(entry(r));
        }
        m.setBatch(b);
      }
    }
    if (r.nextBoolean()) m.setHeadIndex(r.nextInt(3) == 0 ? r.nextLong() : r.nextInt(1_000_000));
    if (r.nextInt(8) == 0) m.setTopicId(bytes(r, 16));
    byte[] b = m.build().toByteArray();
    if (r.nextInt(10) == 0) { // a field repeated: the last value wins, a second batch merges
      b = concat(b, m.build().toByteArray());
    }
    return b;
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] c = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, c, a.length, b.length);
    return c;
  }

  private static byte[] damage(Random r, byte[] b) {
    b = b.clone();
    switch (r.nextInt(3)) {
      case 0 -> {
        return Arrays.copyOf(b, b.length == 0 ? 0 : r.nextInt(b.length));
      }
      case 1 -> {
        for (int i = 0, n = 1 + r.nextInt(3); i < n && b.length > 0; i++) {
          b[r.nextInt(b.length)] = (byte) r.nextInt(256);
        }
      }
      default -> {
        if (b.length > 0) {
          b[r.nextInt(b.length)] ^= (byte) (1 << r.nextInt(8));
        }
      }
    }
    return b;
  }

  private static void check(byte[] b, String why) throws Exception {
    List<Entry> got = new ArrayList<>();
    List<Entry> whole = new ArrayList<>();
    long head;
    try {
      head = Frames.batch(b, (buf, e) -> {
        Entry p = Entry.parser().parseFrom(buf, e.off, e.end - e.off);
        whole.add(p);
        Entry.Builder x = Entry.newBuilder().setIndex(e.index).setKindValue(e.kind).setEpoch(e.epoch)
            .setTombstone(e.tombstone).setTxn(e.txn)
            .setViewBytes(ByteString.copyFrom(buf, e.view, e.viewLen))
            .setKey(ByteString.copyFrom(buf, e.key, e.keyLen))
            .setValue(ByteString.copyFrom(buf, e.value, e.valueLen));
        got.add(x.build());
      });
    } catch (InvalidProtocolBufferException e) {
      return; // the generated parser's, as a frame not read in place
    }
    if (head < 0) {
      return; // the generated parser's
    }
    SubscribeResponse m = SubscribeResponse.parseFrom(b);
    assertEquals(SubscribeResponse.MsgCase.BATCH, m.getMsgCase(), why);
    assertEquals(m.getHeadIndex(), head, why);
    List<Entry> want = m.getBatch().getEntriesList();
    assertEquals(want.size(), got.size(), why);
    for (int i = 0; i < want.size(); i++) {
      Entry w = want.get(i);
      Entry g = got.get(i);
      assertEquals(w, whole.get(i), why + " entry " + i);
      assertEquals(w.getIndex(), g.getIndex(), why);
      assertEquals(w.getKindValue(), g.getKindValue(), why);
      assertEquals(w.getEpoch(), g.getEpoch(), why);
      assertEquals(w.getTombstone(), g.getTombstone(), why);
      assertEquals(w.getTxn(), g.getTxn(), why);
      assertEquals(w.getViewBytes(), g.getViewBytes(), why);
      assertArrayEquals(w.getKey().toByteArray(), g.getKey().toByteArray(), why);
      assertArrayEquals(w.getValue().toByteArray(), g.getValue().toByteArray(), why);
    }
  }

  @Test
  void readsWhatTheGeneratedParserReads() throws Exception {
    long seed = Long.getLong("frames.seed", System.nanoTime());
    Random r = new Random(seed);
    int batches = 0;
    for (int i = 0; i < 20_000; i++) {
      byte[] b = frame(r);
      check(b, "seed " + seed + " frame " + i);
      if (Frames.batch(b, (x, e) -> { }) >= 0) {
        batches++;
      }
      for (int d = 0; d < 3; d++) {
        check(damage(r, b), "seed " + seed + " frame " + i + " damaged " + d);
      }
    }
    assertTrue(batches > 10_000, "most frames are batches read in place: " + batches);
  }

  @Test
  void manyReadsWhatTheGeneratedParserReads() throws Exception {
    long seed = Long.getLong("frames.seed", System.nanoTime());
    Random r = new Random(seed);
    int taken = 0;
    for (int i = 0; i < 20_000; i++) {
      SubscribeManyResponse.Builder m = SubscribeManyResponse.newBuilder();
      if (r.nextInt(4) > 0) m.setChannel(r.nextInt(3) == 0 ? r.nextInt() : r.nextInt(1000));
      if (r.nextInt(5) > 0) m.setResponse(SubscribeResponse.parseFrom(frame(r)));
      if (r.nextInt(6) == 0) m.setEnd(ChannelEnd.newBuilder().setCode(r.nextInt(17)).setMessage(TEXTS[r.nextInt(TEXTS.length)]));
      if (r.nextInt(10) == 0) {
        m.setUnknownFields(UnknownFieldSet.newBuilder()
            .addField(4 + r.nextInt(100), UnknownFieldSet.Field.newBuilder().addVarint(r.nextLong()).build()).build());
      }
      byte[] b = m.build().toByteArray();
      if (r.nextInt(10) == 0) {
        b = concat(b, m.build().toByteArray());
      }
      for (int d = 0; d < 3; d++) {
        byte[] x = d == 0 ? b : damage(r, b);
        String why = "seed " + seed + " message " + i + " damaged " + d;
        Frames.ManyFrame f = Frames.many(x);
        if (f == null) {
          continue; // the generated parser's
        }
        taken++;
        SubscribeManyResponse want;
        try {
          want = SubscribeManyResponse.parseFrom(x);
        } catch (InvalidProtocolBufferException e) {
          // The fault is in the response, which the channel's session parses and refuses.
          try {
            SubscribeResponse.parser().parseFrom(x, f.response(), f.responseEnd() - f.response());
            fail(why + ": the message does not parse, its response does: " + e.getMessage());
          } catch (InvalidProtocolBufferException expected) {
            continue;
          }
          continue;
        }
        assertEquals(want.getChannel(), f.channel(), why);
        assertTrue(want.hasResponse() && !want.hasEnd(), why);
        assertEquals(want.getResponse().toByteString(),
            SubscribeResponse.parser().parseFrom(x, f.response(), f.responseEnd() - f.response()).toByteString(), why);
      }
    }
    assertTrue(taken > 10_000, "most messages are read in place: " + taken);
  }

  @Test
  void viewOfMatchesBytes() throws Exception {
    byte[] b = SubscribeResponse.newBuilder().setBatch(Batch.newBuilder()
        .addEntries(Entry.newBuilder().setView("markets"))
        .addEntries(Entry.newBuilder().setView("events"))
        .addEntries(Entry.newBuilder().setView("event"))).build().toByteArray();
    byte[][] names = {"events".getBytes(), "markets".getBytes()};
    List<Integer> got = new ArrayList<>();
    Frames.batch(b, (buf, e) -> got.add(Frames.viewOf(buf, e, names)));
    assertEquals(List.of(1, 0, -1), got);
  }
}
