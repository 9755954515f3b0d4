package io.statecast.client;

import com.google.protobuf.InvalidProtocolBufferException;
import io.grpc.CallCredentials;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.nio.NioEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioSocketChannel;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import statecast.v1.PlayerOuterClass.SubscribeManyRequest;
import statecast.v1.PlayerOuterClass.SubscribeManyResponse;
import statecast.v1.PlayerOuterClass.SubscribeRequest;

/**
 * Shares, per player address, one connection and one {@code SubscribeMany} stream among the
 * clients built with {@link StatecastClient.Builder#many(Many)}: each client subscribes as a
 * channel of that stream instead of a Subscribe stream of its own (schemas/proto/README.md,
 * "Many subscriptions on one stream"). The player then keeps no goroutine and no gRPC
 * stream per client, which is what a process holding many subscriptions at once needs (a
 * gateway with one filtered client per connected user). Each client is otherwise unchanged:
 * its views, selections, readiness, failover and state directory are its own, and a channel
 * that ends is subscribed again as a stream would be.
 *
 * <p>The clients of one {@code Many} share its connections, which are built with the
 * settings (TLS, token) of the first client that needs each address: give one {@code Many}
 * only to clients with the same settings. Its own thread reads every stream and hands each
 * channel's messages to its client's receive thread, at most a few dozen ahead of what
 * those threads have handled: a client that falls behind holds up the others on the
 * stream. Close it after the clients that use it.
 */
public final class Many implements AutoCloseable {
  private final Map<String, Conn> conns = new HashMap<>();
  private final List<ManagedChannel> shut = new ArrayList<>(); // every channel closed: close awaits them
  private final List<Thread> threads = new ArrayList<>(); // every thread it started, joined at close
  private final ExecutorService executor = Executors.newSingleThreadExecutor(r -> thread(r, "statecast-many"));
  private final ExecutorService offload = Executors.newCachedThreadPool(r -> thread(r, "statecast-many-offload"));
  private final EventLoopGroup eventLoop = new NioEventLoopGroup(1, (java.util.concurrent.ThreadFactory) r -> thread(r, "statecast-many-netty"));
  private boolean closed;

  /** An empty {@code Many}: it connects to each address when a client first needs it. */
  public Many() {}

  private Thread thread(Runnable r, String name) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    synchronized (threads) {
      threads.add(t);
    }
    return t;
  }

  /** The shared channel to addr, built from the first caller's builder; release gives it back. */
  synchronized ManagedChannel channel(String addr, Supplier<NettyChannelBuilder> builder) {
    if (closed) {
      throw new IllegalStateException("the Many is closed");
    }
    Conn c = conns.get(addr);
    if (c == null) {
      ManagedChannel ch = builder.get()
          .eventLoopGroup(eventLoop)
          .channelType(NioSocketChannel.class)
          .executor(executor)
          .offloadExecutor(offload)
          .build();
      c = new Conn(ch);
      conns.put(addr, c);
    }
    c.users++;
    return c.ch;
  }

  /** Gives back a client's use of addr's channel: the last one closes it. */
  synchronized void release(String addr) {
    Conn c = conns.get(addr);
    if (c != null && --c.users == 0) {
      conns.remove(addr);
      c.shut();
      shut.add(c.ch);
    }
  }

  /**
   * Opens a channel on addr's stream (opening the stream when it has none) for a session:
   * what comes for the channel runs on the session's receive thread.
   */
  Requests open(String addr, CallCredentials creds, ExecutorService receive, Sink session) {
    Conn c;
    synchronized (this) {
      c = conns.get(addr);
    }
    if (c == null) {
      throw new IllegalStateException("the Many is closed");
    }
    return c.open(creds, receive, session);
  }

  /** Closes every connection and ends its threads: clients still using it lose their subscriptions. */
  @Override
  public void close() {
    List<ManagedChannel> chs;
    synchronized (this) {
      closed = true;
      for (Conn c : conns.values()) {
        c.shut();
        shut.add(c.ch);
      }
      conns.clear();
      chs = new ArrayList<>(shut);
    }
    try {
      for (ManagedChannel ch : chs) {
        ch.awaitTermination(5, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    executor.shutdownNow();
    offload.shutdownNow();
    eventLoop.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
    try {
      executor.awaitTermination(5, TimeUnit.SECONDS);
      offload.awaitTermination(5, TimeUnit.SECONDS);
      eventLoop.awaitTermination(5, TimeUnit.SECONDS);
      Threads.joinAll(threads);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Whether every thread the Many started has ended (after close). */
  boolean threadsEnded() {
    synchronized (threads) {
      return threads.stream().noneMatch(Thread::isAlive);
    }
  }

  /** What a session sends on its stream, a Subscribe stream or a channel. */
  interface Requests {
    void onNext(SubscribeRequest m);

    void cancel(String why);
  }

  /** One address's connection and its current stream. Guarded by itself. */
  private static final class Conn {
    final ManagedChannel ch;
    int users; // guarded by the Many
    Stream stream;
    int next;

    Conn(ManagedChannel ch) {
      this.ch = ch;
    }

    void shut() {
      synchronized (this) {
        if (stream != null) {
          stream.fail(Status.UNAVAILABLE.withDescription("the Many's connection closed"));
        }
      }
      ch.shutdownNow();
    }

    synchronized Requests open(CallCredentials creds, ExecutorService receive, Sink session) {
      if (stream == null || stream.failed) {
        CallOptions opts = creds == null ? CallOptions.DEFAULT : CallOptions.DEFAULT.withCallCredentials(creds);
        stream = new Stream(this);
        stream.out = ClientCalls.asyncBidiStreamingCall(ch.newCall(Frames.SUBSCRIBE_MANY, opts), stream);
        next = 0;
      }
      Chan c = new Chan(stream, ++next, receive, session);
      stream.chans.put(c.id, c);
      return c;
    }
  }

  /** What a channel's frames go to: a client's session, on its receive thread. */
  interface Sink {
    /** A response of the channel, as bytes: b[off, end). */
    void frame(byte[] b, int off, int end);

    void onError(Throwable t);

    void onCompleted();
  }

  /**
   * One SubscribeMany stream: routes each channel's messages to its session. It reads at
   * most {@link #WINDOW} messages ahead of what the clients' receive threads have handled
   * (gRPC's inbound flow control, requested by hand), so that a client whose frames wait
   * holds up the stream instead of piling them up in memory.
   */
  private static final class Stream implements ClientResponseObserver<SubscribeManyRequest, byte[]> {
    static final int WINDOW = 32;
    final Conn conn;
    volatile ClientCallStreamObserver<SubscribeManyRequest> call;
    final Map<Integer, Chan> chans = new HashMap<>(); // guarded by conn
    StreamObserver<SubscribeManyRequest> out; // guarded by conn
    boolean failed; // guarded by conn

    Stream(Conn conn) {
      this.conn = conn;
    }

    @Override
    public void beforeStart(ClientCallStreamObserver<SubscribeManyRequest> r) {
      call = r;
      r.disableAutoRequestWithInitial(WINDOW);
    }

    /** One message handled (or dropped): the stream may read one more. */
    void handled() {
      ClientCallStreamObserver<SubscribeManyRequest> c = call;
      if (c != null) {
        c.request(1);
      }
    }

    /**
     * A response as bytes: a channel's response is handed to its session as the bytes it
     * is (Frames.many), without parsing it here, so a malformed one ends that channel's
     * session only; anything else is parsed, and a malformed one ends the stream.
     */
    @Override
    public void onNext(byte[] b) {
      Frames.ManyFrame f = Frames.many(b);
      if (f != null) {
        Chan c;
        synchronized (conn) {
          c = chans.get(f.channel());
        }
        if (c == null) {
          handled();
        } else {
          c.runHandled(() -> c.session.frame(b, f.response(), f.responseEnd()));
        }
        return;
      }
      SubscribeManyResponse r;
      try {
        r = SubscribeManyResponse.parseFrom(b);
      } catch (InvalidProtocolBufferException e) {
        ClientCallStreamObserver<SubscribeManyRequest> c = call;
        if (c != null) {
          c.cancel("a SubscribeMany response does not parse", e);
        }
        fail(Status.INTERNAL.withDescription("a SubscribeMany response does not parse: " + e.getMessage()));
        return;
      }
      onNext(r);
    }

    private void onNext(SubscribeManyResponse r) {
      Chan c;
      synchronized (conn) {
        c = chans.get(r.getChannel());
        if (c != null && r.hasEnd()) {
          chans.remove(r.getChannel());
        }
      }
      if (c == null) {
        handled();
        return;
      }
      if (r.hasEnd()) {
        if (r.getEnd().getCode() == Status.Code.OK.value()) {
          c.runHandled(c.session::onCompleted);
        } else {
          Status st = Status.fromCodeValue(r.getEnd().getCode()).withDescription(r.getEnd().getMessage());
          c.runHandled(() -> c.session.onError(st.asRuntimeException()));
        }
        return;
      }
      byte[] m = r.getResponse().toByteArray();
      c.runHandled(() -> c.session.frame(m, 0, m.length));
    }

    @Override
    public void onError(Throwable t) {
      fail(Status.fromThrowable(t));
    }

    @Override
    public void onCompleted() {
      fail(Status.UNAVAILABLE.withDescription("the player ended the stream"));
    }

    /** Ends the stream: every channel's session gets st. */
    void fail(Status st) {
      List<Chan> left;
      synchronized (conn) {
        failed = true;
        if (conn.stream == this) {
          conn.stream = null;
        }
        left = new ArrayList<>(chans.values());
        chans.clear();
      }
      for (Chan c : left) {
        c.run(() -> c.session.onError(st.asRuntimeException()));
      }
    }

    void send(SubscribeManyRequest m) {
      synchronized (conn) {
        if (!failed) {
          out.onNext(m);
        }
      }
    }
  }

  /** One session's channel. */
  private static final class Chan implements Requests {
    final Stream stream;
    final int id;
    final ExecutorService receive;
    final Sink session;
    final java.util.concurrent.atomic.AtomicInteger pending = new java.util.concurrent.atomic.AtomicInteger();

    Chan(Stream stream, int id, ExecutorService receive, Sink session) {
      this.stream = stream;
      this.id = id;
      this.receive = receive;
      this.session = session;
    }

    /** Runs a callback of the session on its receive thread (none once its client closed). */
    void run(Runnable r) {
      try {
        receive.execute(r);
      } catch (RejectedExecutionException e) {
        // The client closed.
      }
    }

    /**
     * Runs a message's callback on the session's receive thread and then lets the stream
     * read one more. The messages handed over and not yet handled are counted, so that a
     * channel cancelled with some still queued (its client closing) gives them back.
     */
    void runHandled(Runnable r) {
      pending.incrementAndGet();
      try {
        receive.execute(() -> {
          try {
            r.run();
          } finally {
            release();
          }
        });
      } catch (RejectedExecutionException e) {
        release(); // the client closed
      }
    }

    private void release() {
      if (pending.getAndUpdate(n -> n > 0 ? n - 1 : 0) > 0) {
        stream.handled();
      }
    }

    @Override
    public void onNext(SubscribeRequest m) {
      stream.send(SubscribeManyRequest.newBuilder().setChannel(id).setRequest(m).build());
    }

    @Override
    public void cancel(String why) {
      synchronized (stream.conn) {
        stream.chans.remove(id);
      }
      for (int n = pending.getAndSet(0); n > 0; n--) {
        stream.handled();
      }
      stream.send(SubscribeManyRequest.newBuilder().setChannel(id).setClose(true).build());
    }
  }
}
