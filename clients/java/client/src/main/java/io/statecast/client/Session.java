package io.statecast.client;

import com.google.protobuf.InvalidProtocolBufferException;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import statecast.v1.PlayerOuterClass.Ack;
import statecast.v1.PlayerOuterClass.Entry;
import statecast.v1.PlayerOuterClass.Kind;
import statecast.v1.PlayerOuterClass.SubscribeRequest;
import statecast.v1.PlayerOuterClass.SubscribeResponse;

/**
 * One subscription: a Subscribe stream, or a channel of a {@link Many}, with one player,
 * from its Hello to its end. Its frames are handled on the client's receive thread, in
 * order: a snapshot's rows gathered as bytes and built at its end, live entries grouped
 * into whole source transactions and published to the views under the client's write
 * lock, acks sent for what was received. Any error ends the session; the client then
 * subscribes again ({@link StatecastClient#retry}). A session that is no longer the
 * client's current one ignores what still arrives.
 */
final class Session implements Many.Sink {
  private static final Logger LOG = LoggerFactory.getLogger(StatecastClient.class);

  private final StatecastClient c;
  final String addr;
  final boolean resumed;
  Many.Requests requests;
  boolean ended;
  private boolean firstFrame;
  long readyAt = -1;
  long lastFrame = System.nanoTime(); // for the idle readiness fallback: from the Hello on
  private long received = -1;
  // An open source transaction: entries received since its first txn entry.
  private boolean open;
  private final List<Entry> pending = new ArrayList<>();
  // The snapshot being received, and a snapshot waiting for the end of a transaction
  // open at its index.
  boolean inSnapshot;
  private long snapIndex;
  private Map<View<?>, View.Snap<?>> snapRows;
  private byte[][] snapNames; // snapRows' views by name (UTF-8), for the rows read in place
  private View.Snap<?>[] snapViews;
  private Entry snapPosition;
  private Map<View<?>, View.Snap<?>> stagedSnap;
  private long stagedSnapIndex;

  private final long reselected; // the reselections made before it (its snapshot serves them)

  Session(StatecastClient c, String addr, boolean resumed, long reselected, long from) {
    this.c = c;
    this.addr = addr;
    this.resumed = resumed;
    this.reselected = reselected;
    this.received = resumed ? from : -1;
  }

  private void beforeStart(ClientCallStreamObserver<SubscribeRequest> r) {
    this.requests = new Many.Requests() {
      @Override
      public void onNext(SubscribeRequest m) {
        r.onNext(m);
      }

      @Override
      public void cancel(String why) {
        r.cancel(why, null);
      }
    };
  }

  void send(SubscribeRequest m) {
    if (!ended) {
      requests.onNext(m);
    }
  }

  void cancel(String why) {
    if (!ended) {
      ended = true;
      requests.cancel(why);
    }
  }

  /** The session as the observer of a Subscribe call whose responses come as bytes. */
  ClientResponseObserver<SubscribeRequest, byte[]> raw() {
    return new ClientResponseObserver<>() {
      @Override
      public void beforeStart(ClientCallStreamObserver<SubscribeRequest> r) {
        Session.this.beforeStart(r);
      }

      @Override
      public void onNext(byte[] b) {
        frame(b, 0, b.length);
      }

      @Override
      public void onError(Throwable t) {
        Session.this.onError(t);
      }

      @Override
      public void onCompleted() {
        Session.this.onCompleted();
      }
    };
  }

  /** A response, as bytes: b[off, end). */
  @Override
  public void frame(byte[] b, int off, int end) {
    receive(() -> {
      if (!inSnapshot || !snapshotFrame(b, off, end)) {
        handle(SubscribeResponse.parser().parseFrom(b, off, end - off));
      }
    });
  }

  private interface Step {
    void run() throws InvalidProtocolBufferException;
  }

  private void receive(Step step) {
    if (c.session != this || ended) {
      return;
    }
    c.attempt = 0;
    try {
      step.run();
    } catch (StatecastException e) {
      cancel(e.getMessage());
      c.retry(this, e);
    } catch (RuntimeException | InvalidProtocolBufferException e) {
      cancel(e.toString());
      c.retry(this, new StatecastException(null, "stream " + c.stream() + ": " + e, false, e));
    }
  }

  @Override
  public void onError(Throwable t) {
    ended = true;
    c.retry(this, c.refusal(addr, Status.fromThrowable(t)));
  }

  @Override
  public void onCompleted() {
    ended = true;
    c.retry(this, new StatecastException(null, "player " + addr + ": the stream ended", false, null));
  }

  private StatecastException order(String what) {
    return new StatecastException(null, "stream " + c.stream() + " from " + addr + ": " + what, false, null);
  }

  private void handle(SubscribeResponse m) throws InvalidProtocolBufferException {
    byte[] t = m.getTopicId().toByteArray();
    if (t.length > 0 && !java.util.Arrays.equals(t, c.topic)) {
      boolean fresh = m.hasResyncRequired() || m.hasSnapshotBegin() || c.topic.length == 0;
      if (!fresh) {
        c.forceSnapshot = true;
        c.distrusted = true;
        throw order("the topic ID changed: subscribing for a snapshot");
      }
      c.topic = t;
    }
    seen(m.getHeadIndex());
    switch (m.getMsgCase()) {
      case BATCH -> {
        if (inSnapshot) {
          // A batch the in-place reading did not take (snapshotFrame): read the same way,
          // from its bytes, so that a snapshot's rows have one path.
          byte[] b = SubscribeResponse.newBuilder().setBatch(m.getBatch()).build().toByteArray();
          snapshotRows(b, 0, b.length);
        } else {
          liveBatch(m.getBatch().getEntriesList());
        }
      }
      case PROGRESS -> {
        if (!inSnapshot) {
          progress(m.getProgress().getIndex());
        }
      }
      case SNAPSHOT_BEGIN -> {
        if (inSnapshot) {
          throw order("snapshot begin inside a snapshot");
        }
        inSnapshot = true;
        snapIndex = m.getSnapshotBegin().getIndex();
        snapRows = new HashMap<>();
        snapPosition = null;
        open = false;
        pending.clear();
        stagedSnap = null;
        List<String> names = m.getSnapshotBegin().getViewsList();
        for (View<?> v : c.views.values()) {
          if (names.isEmpty() || names.contains(v.name())) {
            snapRows.put(v, v.newSnap());
          }
        }
        snapNames = new byte[snapRows.size()][];
        snapViews = new View.Snap<?>[snapRows.size()];
        int i = 0;
        for (Map.Entry<View<?>, View.Snap<?>> e : snapRows.entrySet()) {
          snapNames[i] = e.getKey().name().getBytes(StandardCharsets.UTF_8);
          snapViews[i++] = e.getValue();
        }
      }
      case SNAPSHOT_END -> {
        if (!inSnapshot) {
          throw order("snapshot end outside a snapshot");
        }
        inSnapshot = false;
        for (Map.Entry<View<?>, View.Snap<?>> e : snapRows.entrySet()) {
          StatecastClient.build(e.getKey(), e.getValue()); // before the write lock
        }
        long x = m.getSnapshotEnd().getIndex();
        received = Math.max(received, x);
        if (open) {
          stagedSnap = snapRows;
          stagedSnapIndex = x;
        } else {
          publish(List.of(), snapRows, x);
          markReady();
        }
        snapRows = null;
        ack(received);
      }
      case RESYNC_REQUIRED -> {
        if (inSnapshot) {
          throw order("resync required inside a snapshot");
        }
        LOG.warn("stream {}: resync required ({}: {}); a snapshot replaces the views", c.stream(),
            m.getResyncRequired().getReason(), m.getResyncRequired().getDetail());
      }
      default -> throw order("unknown frame");
    }
  }

  /** A frame came with this head index (0: none). */
  private void seen(long headIndex) {
    if (headIndex > 0) {
      c.head = headIndex;
    }
    lastFrame = System.nanoTime();
    if (!firstFrame) {
      firstFrame = true;
      if (resumed && headIndex > 0 && !c.isReady()) {
        readyAt = headIndex;
      }
    }
  }

  /**
   * A frame in a snapshot, as bytes: its batch's rows read in place (Frames). False, having
   * done nothing, when it is not a batch.
   */
  private boolean snapshotFrame(byte[] b, int off, int end) {
    long headIndex;
    try {
      headIndex = snapshotRows(b, off, end);
    } catch (InvalidProtocolBufferException e) {
      // The generated parser decides: it refuses the frame too, or it takes it, and the
      // entries taken before the error are taken again, in the same order, to the same end.
      return false;
    }
    if (headIndex < 0) {
      return false;
    }
    seen(headIndex);
    return true;
  }

  /** The rows of a snapshot batch in b[off, end) (Frames.batch); its head index, or -1. */
  private long snapshotRows(byte[] b, int off, int end) throws InvalidProtocolBufferException {
    long headIndex = Frames.batch(b, off, end, this::snapshotEntry);
    if (snapPosition != null) {
      c.setPosition(snapPosition);
    }
    return headIndex;
  }

  private void snapshotEntry(byte[] b, Frames.Entry e) throws InvalidProtocolBufferException {
    if (e.index > snapIndex) {
      throw order("snapshot entry " + e.index + " above the snapshot's index " + snapIndex);
    }
    if (e.kind == Kind.KIND_POSITION_VALUE) {
      snapPosition = Entry.parser().parseFrom(b, e.off, e.end - e.off);
      if (open) {
        open = false;
        pending.clear();
      }
      return;
    }
    if (e.kind != Kind.KIND_ROW_VALUE) {
      return;
    }
    int v = Frames.viewOf(b, e, snapNames);
    if (v < 0) {
      return;
    }
    if (!snapViews[v].received.add(b, e.key, e.keyLen, e.value, e.tombstone ? -1 : e.valueLen)) {
      throw order("view " + new String(snapNames[v], StandardCharsets.UTF_8) + ": snapshot row key without a view prefix at index " + e.index);
    }
    if (e.txn) {
      // A transaction open at X: the rows after the snapshot's last position entry are
      // published with the rest of it.
      open = true;
    }
  }

  private void liveBatch(List<Entry> entries) {
    int publishUpTo = -1;
    int base = pending.size();
    for (int i = 0; i < entries.size(); i++) {
      Entry e = entries.get(i);
      if (e.getIndex() <= received) {
        throw order("entry " + e.getIndex() + " at or below " + received + " already received");
      }
      received = e.getIndex();
      pending.add(e);
      if (e.getTxn()) {
        open = true;
      }
      if (e.getKind() == Kind.KIND_POSITION) {
        open = false;
      }
      if (!open) {
        publishUpTo = base + i;
      }
    }
    if (publishUpTo >= 0) {
      List<Entry> now = new ArrayList<>(pending.subList(0, publishUpTo + 1));
      pending.subList(0, publishUpTo + 1).clear();
      Map<View<?>, View.Snap<?>> snap = stagedSnap;
      stagedSnap = null;
      publish(now, snap, now.get(now.size() - 1).getIndex());
      if (snap != null) {
        markReady();
      }
    }
    ack(received);
  }

  private void progress(long index) {
    if (index > received) {
      received = index;
      if (!open) {
        publish(List.of(), null, index);
      }
      ack(index);
    }
    if (resumed && !open) {
      markReady();
    }
  }

  private void ack(long index) {
    if (index >= 0) {
      send(SubscribeRequest.newBuilder().setAck(Ack.newBuilder().setIndex(index)).build());
    }
  }

  void markReady() {
    if (!c.ready.isDone()) {
      LOG.info("stream {}: ready at index {}", c.stream(), c.applied);
      c.ready.complete(null);
    }
    if (!resumed) {
      for (java.util.Iterator<StatecastClient.Reselect> it = c.reselects.iterator(); it.hasNext(); ) {
        StatecastClient.Reselect r = it.next();
        if (r.seq() <= reselected) {
          r.done().complete(null);
          it.remove();
        }
      }
    }
  }

  /** Applies a snapshot (when not null) and then entries, as one publication at index. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private void publish(List<Entry> entries, Map<View<?>, View.Snap<?>> snap, long index) {
    List<Runnable> changes = new ArrayList<>();
    List<StatecastException> mismatches = new ArrayList<>();
    long stamp = c.lock.writeLock();
    try {
      if (snap != null) {
        for (Map.Entry<View<?>, View.Snap<?>> e : snap.entrySet()) {
          ((View) e.getKey()).replace((View.Snap) e.getValue(), changes);
        }
        if (c.applied >= 0) {
          c.resyncs.incrementAndGet();
        }
        c.distrusted = false;
      }
      for (Entry e : entries) {
        switch (e.getKind()) {
          case KIND_ROW -> {
            View<?> v = c.views.get(e.getView());
            if (v != null) {
              String key = Keys.rest(e.getKey().toStringUtf8());
              if (key == null) {
                throw order("view " + v.name() + ": row key without a view prefix at index " + e.getIndex());
              }
              v.apply(key, e.getTombstone() ? null : e.getValue().toByteArray(), changes);
            }
          }
          case KIND_EPOCH_END -> {
            View<?> v = c.views.get(e.getView());
            // A selected view holds part of the view: the epoch's count and hash are the
            // whole view's (the player does not send them to it).
            if (v != null && v.selection().isEmpty()) {
              StatecastException bad = c.checkEpoch(v, e);
              if (bad != null) {
                mismatches.add(bad);
              }
            }
          }
          case KIND_POSITION -> c.setPosition(e);
          default -> { }
        }
      }
      c.applied = index;
    } finally {
      c.lock.unlockWrite(stamp);
    }
    for (Runnable r : changes) {
      r.run();
    }
    if (readyAt >= 0 && index >= readyAt) {
      markReady();
    }
    c.checkWaiters();
    if (!mismatches.isEmpty()) {
      c.forceSnapshot = true;
      c.distrusted = true;
      throw mismatches.get(0);
    }
  }
}
