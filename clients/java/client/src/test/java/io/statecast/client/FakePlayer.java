package io.statecast.client;

import com.google.protobuf.ByteString;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import statecast.v1.PlayerGrpc;
import statecast.v1.PlayerOuterClass.Batch;
import statecast.v1.PlayerOuterClass.ChannelEnd;
import statecast.v1.PlayerOuterClass.Entry;
import statecast.v1.PlayerOuterClass.Hello;
import statecast.v1.PlayerOuterClass.Kind;
import statecast.v1.PlayerOuterClass.SnapshotBegin;
import statecast.v1.PlayerOuterClass.SnapshotEnd;
import statecast.v1.PlayerOuterClass.SubscribeManyRequest;
import statecast.v1.PlayerOuterClass.SubscribeManyResponse;
import statecast.v1.PlayerOuterClass.SubscribeRequest;
import statecast.v1.PlayerOuterClass.SubscribeResponse;

/** A scripted player on a loopback port: each subscription is a {@link Sub} the test drives. */
final class FakePlayer implements AutoCloseable {
  static final ByteString TOPIC = ByteString.copyFrom(new byte[16]);

  final BlockingQueue<Sub> subs = new LinkedBlockingQueue<>();
  final java.util.concurrent.atomic.AtomicInteger subscribeCalls = new java.util.concurrent.atomic.AtomicInteger();
  final java.util.concurrent.atomic.AtomicInteger subscribeManyCalls = new java.util.concurrent.atomic.AtomicInteger();
  /** The channels the clients closed (SubscribeMany). */
  final BlockingQueue<Integer> closedChannels = new LinkedBlockingQueue<>();
  private final Server server;

  FakePlayer() throws Exception {
    server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
        .addService(new PlayerGrpc.PlayerImplBase() {
          @Override
          public StreamObserver<SubscribeRequest> subscribe(StreamObserver<SubscribeResponse> out) {
            subscribeCalls.incrementAndGet();
            Sub s = new Sub(out);
            subs.add(s);
            return s;
          }

          @Override
          public StreamObserver<SubscribeManyRequest> subscribeMany(StreamObserver<SubscribeManyResponse> out) {
            subscribeManyCalls.incrementAndGet();
            return new ManyStream(out);
          }
        })
        .build()
        .start();
  }

  String addr() {
    return "127.0.0.1:" + server.getPort();
  }

  Sub next() throws InterruptedException {
    Sub s = subs.poll(20, TimeUnit.SECONDS);
    if (s == null) {
      throw new AssertionError("no subscription within 20 s");
    }
    return s;
  }

  @Override
  public void close() throws Exception {
    server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
  }

  /** A SubscribeMany stream: each channel's Hello makes a Sub, whose frames go out on its channel. */
  private final class ManyStream implements StreamObserver<SubscribeManyRequest> {
    private final StreamObserver<SubscribeManyResponse> out;
    private final java.util.Map<Integer, Sub> chans = new java.util.concurrent.ConcurrentHashMap<>();

    ManyStream(StreamObserver<SubscribeManyResponse> out) {
      this.out = out;
    }

    private void send(SubscribeManyResponse m) {
      synchronized (out) {
        out.onNext(m);
      }
    }

    @Override
    public void onNext(SubscribeManyRequest r) {
      int ch = r.getChannel();
      if (r.getClose()) {
        chans.remove(ch);
        closedChannels.add(ch);
        return;
      }
      Sub s = chans.get(ch);
      if (s == null && r.getRequest().hasHello()) {
        s = new Sub(new StreamObserver<SubscribeResponse>() {
          @Override
          public void onNext(SubscribeResponse m) {
            send(SubscribeManyResponse.newBuilder().setChannel(ch).setResponse(m).build());
          }

          @Override
          public void onError(Throwable t) {
            Status st = Status.fromThrowable(t);
            send(SubscribeManyResponse.newBuilder().setChannel(ch).setEnd(ChannelEnd.newBuilder()
                .setCode(st.getCode().value()).setMessage(st.getDescription() == null ? "" : st.getDescription())).build());
          }

          @Override
          public void onCompleted() {
            send(SubscribeManyResponse.newBuilder().setChannel(ch).setEnd(ChannelEnd.newBuilder()).build());
          }
        });
        chans.put(ch, s);
        subs.add(s);
      }
      if (s != null) {
        s.onNext(r.getRequest());
      }
    }

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {}
  }

  /** One Subscribe stream, or one channel of a SubscribeMany stream. */
  static final class Sub implements StreamObserver<SubscribeRequest> {
    final BlockingQueue<Hello> hello = new LinkedBlockingQueue<>();
    final BlockingQueue<Long> acks = new LinkedBlockingQueue<>();
    private final StreamObserver<SubscribeResponse> out;

    Sub(StreamObserver<SubscribeResponse> out) {
      this.out = out;
    }

    @Override
    public void onNext(SubscribeRequest r) {
      if (r.hasHello()) {
        hello.add(r.getHello());
      } else {
        acks.add(r.getAck().getIndex());
      }
    }

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {}

    Hello hello() throws InterruptedException {
      Hello h = hello.poll(20, TimeUnit.SECONDS);
      if (h == null) {
        throw new AssertionError("no Hello within 20 s");
      }
      return h;
    }

    /** Waits for an ack of at least index. */
    void awaitAck(long index) throws InterruptedException {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (System.nanoTime() < deadline) {
        Long a = acks.poll(100, TimeUnit.MILLISECONDS);
        if (a != null && a >= index) {
          return;
        }
      }
      throw new AssertionError("no ack of " + index);
    }

    synchronized void send(SubscribeResponse.Builder r) {
      out.onNext(r.setTopicId(r.hasBatch() ? ByteString.EMPTY : TOPIC).build());
    }

    void snapshot(long x, Entry... rows) {
      send(SubscribeResponse.newBuilder().setSnapshotBegin(SnapshotBegin.newBuilder().setIndex(x)).setHeadIndex(x));
      if (rows.length > 0) {
        batch(rows);
      }
      send(SubscribeResponse.newBuilder().setSnapshotEnd(SnapshotEnd.newBuilder().setIndex(x)).setHeadIndex(x));
    }

    void batch(Entry... entries) {
      send(SubscribeResponse.newBuilder().setBatch(Batch.newBuilder().addAllEntries(java.util.List.of(entries))));
    }

    void fail(Status st) {
      out.onError(st.asRuntimeException());
    }
  }

  static Entry row(long index, String view, String key, String value, boolean txn) {
    Entry.Builder e = Entry.newBuilder().setIndex(index).setView(view).setKind(Kind.KIND_ROW).setTxn(txn)
        .setKey(ByteString.copyFrom(Keys.escape(view) + "|" + key, StandardCharsets.UTF_8));
    if (value == null) {
      e.setTombstone(true);
    } else {
      e.setValue(ByteString.copyFrom(value, StandardCharsets.UTF_8));
    }
    return e.build();
  }

  static Entry position(long index, String lsn) {
    return Entry.newBuilder().setIndex(index).setKind(Kind.KIND_POSITION).setSourceLsn(lsn)
        .setKey(ByteString.copyFromUtf8("!ctl|position"))
        .setValue(ByteString.copyFromUtf8("{\"lsn\":\"" + lsn + "\",\"time\":\"2026-12-02T00:00:00Z\"}")).build();
  }

  static Entry epochEnd(long index, String view, long rows, String hash) {
    return Entry.newBuilder().setIndex(index).setView(view).setKind(Kind.KIND_EPOCH_END)
        .setKey(ByteString.copyFromUtf8("!ctl|" + view + "|end"))
        .setValue(ByteString.copyFromUtf8("{\"epoch\":1,\"rows\":" + rows + ",\"hash\":\"" + hash + "\"}")).build();
  }
}
