package io.statecast.client;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectReader;
import com.google.protobuf.ByteString;
import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.TlsChannelCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.nio.NioEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioSocketChannel;
import io.grpc.stub.ClientCalls;
import java.io.File;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.StampedLock;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import statecast.v1.PlayerOuterClass.Entry;
import statecast.v1.PlayerOuterClass.Hello;
import statecast.v1.PlayerOuterClass.SubscribeRequest;

/**
 * A cache of one stream's views, kept current by a player (schemas/proto/README.md).
 *
 * <p>Build it with {@link #builder()}, register views ({@link #view}, {@link #rawView}) and
 * their indexes and listeners, then {@link #start()}. {@link #awaitReady()} completes once
 * the initial state is complete; {@link #awaitFor(String)} once the cache reflects every
 * commit up to a source position (read-your-writes). {@link #close()} stops the client and
 * every thread it started.
 *
 * <p>Concurrency: frames are received and applied on one thread of the client's own;
 * readers run on any thread and see each source transaction and snapshot whole; listeners
 * run on the listener executor in key order.
 */
public final class StatecastClient implements AutoCloseable {
  /**
   * The protocol version this client says it speaks (Hello.protocol_version) when it selects
   * nothing: a player that predates selections serves it.
   */
  public static final int PROTOCOL_VERSION = 1;

  /**
   * The protocol version it says when a view has a {@link Selection}: a player of version 1
   * would ignore the selections, and refuses it instead.
   */
  public static final int SELECTIONS_PROTOCOL_VERSION = 2;

  private static final Logger LOG = LoggerFactory.getLogger(StatecastClient.class);
  private static final ObjectMapper JSON =
      new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

  private final Builder cfg;
  private final String instanceId;
  final Map<String, View<?>> views = new LinkedHashMap<>();
  final StampedLock lock = new StampedLock();
  private final ScheduledExecutorService loop;
  private final EventLoopGroup eventLoop;
  private final ExecutorService ownListenerPool;
  private final KeyedExecutor listeners;
  private final StateStore store; // null without a state directory
  // gRPC's blocking work (name resolution): not the receive thread, which builds the views
  // from the state file while the subscription is set up.
  private final ExecutorService offload;
  private final Map<String, ManagedChannel> channels = new HashMap<>();
  final CompletableFuture<Void> ready = new CompletableFuture<>();
  private final List<Waiter> waiters = new ArrayList<>();
  private final AtomicInteger reconnects = new AtomicInteger();
  final AtomicInteger resyncs = new AtomicInteger();
  private final AtomicInteger threadSeq = new AtomicInteger();
  private final List<Thread> threads = new ArrayList<>();

  private volatile boolean started;
  private volatile boolean closed;
  private volatile StatecastException stopped;
  volatile long applied = -1;
  volatile long head;
  private volatile Position position = Position.UNKNOWN;

  // ---- receive-thread state (the loop thread only) ----
  byte[] topic = new byte[0];
  boolean forceSnapshot;
  // The views do not hold a state of the applied index any more (an epoch check failed, the
  // topic changed, a view was reselected): no state file until a snapshot replaced them.
  boolean distrusted;
  // A verified state file whose rows are not in the views yet (between loadState and
  // buildState): the first subscription resumes at its index meanwhile.
  private StateStore.Loaded loading;
  private int addrIndex;
  int attempt;
  Session session;
  // Reselections waiting for the snapshot of a subscription made after them (seq: the
  // number of reselections so far; a session serves those up to its own).
  final List<Reselect> reselects = new ArrayList<>();
  private long reselectSeq;

  record Reselect(long seq, CompletableFuture<Void> done) {}

  private StatecastClient(Builder b) {
    this.cfg = b;
    this.instanceId = b.instanceId != null ? b.instanceId : defaultInstanceId();
    this.loop = Executors.newSingleThreadScheduledExecutor(r -> thread(r, "receive"));
    this.eventLoop = new NioEventLoopGroup(1, (java.util.concurrent.ThreadFactory) r -> thread(r, "net"));
    Executor le = b.listenerExecutor;
    if (le == null) {
      ownListenerPool = Executors.newFixedThreadPool(b.listenerThreads, r -> thread(r, "listener"));
      le = ownListenerPool;
    } else {
      ownListenerPool = null;
    }
    this.listeners = new KeyedExecutor(le);
    this.store = b.stateDir == null ? null : new StateStore(b.stream, b.stateDir, b.stateKey,
        Executors.newSingleThreadExecutor(r -> thread(r, "persist")));
    this.offload = Executors.newCachedThreadPool(r -> thread(r, "offload"));
  }

  /** Whether views keep each row's raw value (for the state file). */
  boolean keepsRaw() {
    return cfg.stateDir != null;
  }

  /** A thread of the client's own, named for its stream and role, joined by close(). */
  private Thread thread(Runnable r, String role) {
    Thread t = new Thread(r, "statecast-" + cfg.stream + "-" + role + "-" + threadSeq.incrementAndGet());
    t.setDaemon(true);
    synchronized (threads) {
      threads.add(t);
    }
    return t;
  }

  /** A new builder. */
  public static Builder builder() {
    return new Builder();
  }

  // ---- registration ----

  /**
   * Registers a typed view decoded with Jackson into {@code type} (a record or a POJO;
   * unknown members are ignored, so a light type decodes only the fields it names).
   */
  public <T> View<T> view(String name, Class<T> type) {
    return view(name, type, null);
  }

  /**
   * Registers a typed view of which the client receives and holds only {@code selection}'s
   * part (null: the whole view).
   */
  public <T> View<T> view(String name, Class<T> type, Selection selection) {
    ObjectReader r = JSON.readerFor(type);
    return view(name, sliceDecoder((buf, off, len) -> r.readValue(buf, off, len)), selection);
  }

  /** Registers a view decoded by {@code decoder}. */
  public <T> View<T> view(String name, Decoder<T> decoder) {
    return view(name, decoder, null);
  }

  /**
   * Registers a view decoded by {@code decoder}, of which the client receives and holds only
   * {@code selection}'s part (null: the whole view).
   */
  public <T> View<T> view(String name, Decoder<T> decoder, Selection selection) {
    checkNotStarted("view " + name);
    if (!name.matches("[A-Za-z_][A-Za-z0-9_.-]*")) {
      throw new IllegalArgumentException("view " + name + ": not a view name ([A-Za-z_][A-Za-z0-9_.-]*)");
    }
    if (views.containsKey(name)) {
      throw new IllegalStateException("view " + name + " is already registered");
    }
    View<T> v = new View<>(this, name, decoder, selection);
    views.put(name, v);
    return v;
  }

  /** Registers a raw view: each row's JSON text as it travels. */
  public View<String> rawView(String name) {
    return rawView(name, null);
  }

  /** Registers a raw view of {@code selection}'s part of the view (null: all of it). */
  public View<String> rawView(String name, Selection selection) {
    return view(name, sliceDecoder((buf, off, len) -> new String(buf, off, len, StandardCharsets.UTF_8)), selection);
  }

  /** Registers a view of Jackson trees. */
  public View<JsonNode> treeView(String name) {
    return treeView(name, null);
  }

  /** Registers a view of Jackson trees of {@code selection}'s part of the view (null: all of it). */
  public View<JsonNode> treeView(String name, Selection selection) {
    return view(name, sliceDecoder((buf, off, len) -> JSON.readTree(buf, off, len)), selection);
  }

  /** Reads a value from buf[off, off + len). */
  private interface SliceReader<T> {
    T read(byte[] buf, int off, int len) throws Exception;
  }

  /** A decoder that reads slices as they are (a snapshot's rows decode in their chunk). */
  private static <T> Decoder<T> sliceDecoder(SliceReader<T> r) {
    return new Decoder<>() {
      @Override
      public T decode(String key, byte[] value) throws Exception {
        return r.read(value, 0, value.length);
      }

      @Override
      public T decode(String key, byte[] buf, int off, int len) throws Exception {
        return r.read(buf, off, len);
      }
    };
  }

  void checkNotStarted(String what) {
    if (started) {
      throw new IllegalStateException(what + ": register before start()");
    }
  }

  // ---- lifecycle ----

  /**
   * Starts receiving and returns at once.
   *
   * @throws IllegalStateException when no view is registered or the client was started
   */
  public synchronized StatecastClient start() {
    if (closed) {
      throw new IllegalStateException("stream " + cfg.stream + ": client is closed");
    }
    if (started) {
      throw new IllegalStateException("stream " + cfg.stream + ": client already started");
    }
    if (views.isEmpty()) {
      throw new IllegalStateException("stream " + cfg.stream + ": register at least one view before start()");
    }
    started = true;
    if (store != null) {
      // The file is verified, the subscription resumes at its index, and the views are
      // built from it while gRPC connects: the frames, handled on this same thread, wait
      // for the build.
      loop.execute(this::loadState);
      loop.execute(this::connect);
      loop.execute(this::buildState);
      long every = cfg.persistInterval.toMillis();
      loop.scheduleWithFixedDelay(() -> {
        if (!store.busy()) {
          StateStore.Cut c = cut();
          if (c != null) {
            store.submit(c);
          }
        }
      }, every, every, TimeUnit.MILLISECONDS);
    } else {
      loop.execute(this::connect);
    }
    return this;
  }

  /**
   * Stops receiving, fails pending waits, and ends every thread the client started (its
   * listener pool after the queued changes ran). Idempotent.
   */
  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
    }
    CompletableFuture<Void> done = new CompletableFuture<>();
    StateStore.Cut[] last = new StateStore.Cut[1];
    try {
      loop.execute(() -> {
        try {
          if (session != null) {
            session.cancel("client closed");
            session = null;
          }
          if (store != null && started) {
            last[0] = cut();
          }
          failAll(new StatecastException(null, "stream " + cfg.stream + ": client closed", true, null));
        } finally {
          done.complete(null);
        }
      });
      done.get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      LOG.debug("close: {}", e.toString());
    }
    if (store != null) {
      // Before the listener pool ends: the last cut waits for the listeners to run its
      // changes.
      store.close(last[0]);
    }
    if (cfg.many != null) {
      // The connections are the Many's: this client gives back its use of them.
      for (String addr : channels.keySet()) {
        cfg.many.release(addr);
      }
      channels.clear();
    }
    for (ManagedChannel ch : channels.values()) {
      ch.shutdownNow();
    }
    for (ManagedChannel ch : channels.values()) {
      try {
        ch.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    loop.shutdownNow();
    offload.shutdownNow();
    eventLoop.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
    if (ownListenerPool != null) {
      ownListenerPool.shutdown();
    }
    try {
      loop.awaitTermination(5, TimeUnit.SECONDS);
      offload.awaitTermination(5, TimeUnit.SECONDS);
      eventLoop.awaitTermination(5, TimeUnit.SECONDS);
      if (ownListenerPool != null) {
        ownListenerPool.awaitTermination(10, TimeUnit.SECONDS);
      }
      Threads.joinAll(threads);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Completes when the initial state of every view is complete; fails if the client stops. */
  public CompletableFuture<Void> awaitReady() {
    return ready.copy();
  }

  /** Whether the initial state is complete. */
  public boolean isReady() {
    return ready.isDone() && !ready.isCompletedExceptionally();
  }

  /**
   * Completes when the cache reflects every commit up to the source position {@code lsn}
   * (PostgreSQL's text form, e.g. the result of {@code pg_current_wal_lsn()} after a
   * commit): the stream's position is at least it, and so is that of every held view the
   * position names as behind. Fails with a {@link StatecastException} naming the view when a
   * held view is stale (stopped by a bad row), or when the client stops.
   */
  public CompletableFuture<Void> awaitFor(String lsn) {
    long p = Position.parseLsn(lsn);
    Waiter w = new Waiter(p, new CompletableFuture<>());
    loop.execute(() -> {
      if (stopped != null) {
        w.future.completeExceptionally(stopped);
        return;
      }
      waiters.add(w);
      checkWaiters();
    });
    return w.future;
  }

  /** The index (Kafka offset) of what the cache holds; -1 before the first snapshot. */
  public long appliedIndex() {
    return applied;
  }

  /** The player's head index in its last message (0: unknown). */
  public long headIndex() {
    return head;
  }

  /** The last source position applied. */
  public Position position() {
    return position;
  }

  /** The stream this client subscribes to. */
  public String stream() {
    return cfg.stream;
  }

  /** The instance id sent as Hello.client_id. */
  public String instanceId() {
    return instanceId;
  }

  /** How many times a subscription ended and the client subscribed again. */
  public int reconnects() {
    return reconnects.get();
  }

  /** How many snapshots replaced held state (the player's resync, or an epoch check). */
  public int resyncs() {
    return resyncs.get();
  }

  /** How many state files the client wrote (0 without a state directory). */
  public long stateWrites() {
    return store == null ? 0 : store.writes.get();
  }

  /** How many state file writes failed (each is logged with its cause). */
  public long stateWriteErrors() {
    return store == null ? 0 : store.errors.get();
  }

  /** Why the client stopped for good, or null while it runs. */
  public StatecastException stoppedBy() {
    return stopped;
  }

  // ---- reads ----

  interface Read<R> {
    R get();
  }

  <R> R readConsistent(Read<R> r) {
    long stamp = lock.tryOptimisticRead();
    R out = r.get();
    if (lock.validate(stamp)) {
      return out;
    }
    stamp = lock.readLock();
    try {
      return r.get();
    } finally {
      lock.unlockRead(stamp);
    }
  }

  <R> R readLocked(Read<R> r) {
    long stamp = lock.readLock();
    try {
      return r.get();
    } finally {
      lock.unlockRead(stamp);
    }
  }

  void notify(String key, Runnable task, String view) {
    listeners.submit(view + "|" + key, task);
  }

  // ---- connecting ----

  private void connect() {
    if (closed || stopped != null) {
      return;
    }
    String addr = cfg.addresses.get(addrIndex % cfg.addresses.size());
    ManagedChannel ch;
    try {
      ch = channel(addr);
    } catch (Exception e) {
      stop(new StatecastException(null, "player " + addr + ": " + e.getMessage(), true, e));
      return;
    }
    Hello.Builder h = Hello.newBuilder()
        .setClientId(instanceId)
        .setService(cfg.service != null ? cfg.service : instanceId)
        .setStream(cfg.stream)
        .addAllViews(views.keySet())
        .setProtocolVersion(PROTOCOL_VERSION)
        .setMaxBatchEntries(cfg.maxBatchEntries)
        .setMaxMessageBytes(cfg.maxReceiveBytes);
    for (View<?> v : views.values()) {
      v.selection().ifPresent(sel -> {
        h.setProtocolVersion(SELECTIONS_PROTOCOL_VERSION);
        h.addSelections(statecast.v1.PlayerOuterClass.Selection.newBuilder()
            .setView(v.name())
            .setFilter(sel.filter())
            .setShardIndex(sel.shardIndex())
            .setShardCount(sel.shardCount())
            .addAllColumns(sel.columns()));
      });
    }
    long from = applied >= 0 ? applied : loading != null ? loading.content().index() : -1;
    boolean resumed = from >= 0 && !forceSnapshot;
    if (resumed) {
      h.setResumeIndex(from);
      h.setTopicId(ByteString.copyFrom(topic));
    }
    forceSnapshot = false;
    Session s = new Session(this, addr, resumed, reselectSeq, from);
    session = s;
    TokenCredentials creds = cfg.token != null ? new TokenCredentials(cfg.token) : null;
    LOG.debug("stream {}: subscribing at {} (resume {})", cfg.stream, addr, resumed ? from : "none");
    if (cfg.many != null) {
      s.requests = cfg.many.open(addr, creds, loop, s);
    } else {
      CallOptions opts = creds == null ? CallOptions.DEFAULT : CallOptions.DEFAULT.withCallCredentials(creds);
      ClientCalls.asyncBidiStreamingCall(ch.newCall(Frames.SUBSCRIBE, opts), s.raw());
    }
    s.send(SubscribeRequest.newBuilder().setHello(h).build());
    if (resumed && !isReady()) {
      loop.schedule(() -> idleReady(s), cfg.readyIdle.toMillis(), TimeUnit.MILLISECONDS);
    }
  }

  /**
   * Readiness after a resume with a player that sends no head_index (older ones): the
   * initial state counts as caught up once no frame arrived for readyIdle. A player that
   * sends one decides by it (or by its first Progress): a slow recovery, nothing sent for a
   * while, must not look caught up.
   */
  private void idleReady(Session s) {
    if (session != s || s.ended || isReady() || s.readyAt >= 0) {
      return;
    }
    long quiet = System.nanoTime() - s.lastFrame;
    long want = cfg.readyIdle.toNanos();
    if (quiet < want || s.inSnapshot) {
      loop.schedule(() -> idleReady(s), Math.max(1, (want - quiet) / 1_000_000), TimeUnit.MILLISECONDS);
      return;
    }
    LOG.info("stream {}: no frame for {} ms after resuming, and the player sends no head index: ready", cfg.stream,
        cfg.readyIdle.toMillis());
    s.markReady();
  }

  private ManagedChannel channel(String addr) throws Exception {
    ManagedChannel ch = channels.get(addr);
    if (ch != null) {
      return ch;
    }
    if (cfg.many != null) {
      ch = cfg.many.channel(addr, () -> {
        try {
          return channelBuilder(addr);
        } catch (Exception e) {
          throw new IllegalStateException(e.getMessage(), e);
        }
      });
    } else if (cfg.transport == Transport.OKHTTP) {
      ch = OkHttpChannels.channel(addr, credentials(), cfg.serverName, cfg.maxReceiveBytes, cfg.recvWindow, loop, offload);
    } else {
      ch = channelBuilder(addr)
          .eventLoopGroup(eventLoop)
          .channelType(NioSocketChannel.class)
          .executor(loop)
          .offloadExecutor(offload)
          .build();
    }
    channels.put(addr, ch);
    return ch;
  }

  /** The TLS settings as gRPC's channel credentials, which either transport takes. */
  private ChannelCredentials credentials() throws java.io.IOException {
    if (cfg.tlsCa == null && cfg.certFile == null && !cfg.tls) {
      return InsecureChannelCredentials.create();
    }
    TlsChannelCredentials.Builder t = TlsChannelCredentials.newBuilder();
    if (cfg.tlsCa != null) {
      t.trustManager(cfg.tlsCa);
    }
    if (cfg.certFile != null) {
      t.keyManager(cfg.certFile, cfg.keyFile);
    }
    return t.build();
  }

  /** The Netty channel's settings: TLS, limits; the caller gives its threads. */
  private NettyChannelBuilder channelBuilder(String addr) throws Exception {
    NettyChannelBuilder b = NettyChannelBuilder.forTarget(addr, credentials())
        .maxInboundMessageSize(cfg.maxReceiveBytes)
        .flowControlWindow(cfg.recvWindow);
    if (cfg.serverName != null) {
      b.overrideAuthority(cfg.serverName);
    }
    return b;
  }

  void retry(Session s, StatecastException why) {
    if (session != s) {
      return;
    }
    session = null;
    if (closed || stopped != null) {
      return;
    }
    if (why.permanent()) {
      stop(why);
      return;
    }
    reconnects.incrementAndGet();
    addrIndex++;
    long min = cfg.backoffMin.toMillis();
    long max = cfg.backoffMax.toMillis();
    long cap = Math.min(max, min << Math.min(attempt, 20));
    attempt++;
    long delay = min + ThreadLocalRandom.current().nextLong(Math.max(1, cap - min + 1));
    LOG.warn("stream {}: {}; subscribing again in {} ms", cfg.stream, why.getMessage(), delay);
    loop.schedule(this::connect, delay, TimeUnit.MILLISECONDS);
  }

  /** View.reselect: on the receive thread, the new selection and a subscription for a snapshot. */
  CompletableFuture<Void> reselect(View<?> v, Selection sel) {
    CompletableFuture<Void> done = new CompletableFuture<>();
    try {
      loop.execute(() -> {
        if (java.util.Objects.equals(v.selection().orElse(null), sel)) {
          done.complete(null);
          return;
        }
        v.setSelection(sel);
        if (!started) {
          done.complete(null);
          return;
        }
        if (closed || stopped != null) {
          done.completeExceptionally(stopped != null ? stopped
              : new StatecastException(v.name(), "stream " + cfg.stream + ": client closed", true, null));
          return;
        }
        LOG.info("stream {}: view {} reselected ({}): subscribing again for a snapshot", cfg.stream, v.name(),
            sel == null ? "the whole view" : sel);
        forceSnapshot = true;
        distrusted = true;
        reselects.add(new Reselect(++reselectSeq, done));
        Session s = session;
        if (s != null) {
          // A retry already scheduled (no session) subscribes with the new selection.
          s.cancel("view " + v.name() + " reselected");
          session = null;
          connect();
        }
      });
    } catch (java.util.concurrent.RejectedExecutionException e) {
      done.completeExceptionally(new StatecastException(v.name(), "stream " + cfg.stream + ": client closed", true, e));
    }
    return done;
  }

  private void stop(StatecastException why) {
    LOG.error("stream {}: client stopped: {}", cfg.stream, why.getMessage());
    stopped = why;
    failAll(why);
  }

  private void failAll(StatecastException why) {
    ready.completeExceptionally(why);
    for (Reselect r : reselects) {
      r.done().completeExceptionally(why);
    }
    reselects.clear();
    for (Waiter w : waiters) {
      w.future.completeExceptionally(why);
    }
    waiters.clear();
  }

  /** The classification of schemas/proto/README.md, "Errors → gRPC status codes". */
  StatecastException refusal(String addr, Status st) {
    String msg = st.getDescription() == null ? "" : st.getDescription();
    String text = "player " + addr + ": " + st.getCode() + ": " + msg;
    String view = null;
    for (String v : views.keySet()) {
      if (msg.contains(v)) {
        view = v;
      }
    }
    boolean permanent = switch (st.getCode()) {
      case PERMISSION_DENIED -> true;
      case NOT_FOUND -> msg.contains("unknown view");
      case INVALID_ARGUMENT -> msg.contains("bad hello");
      default -> false;
    };
    return new StatecastException(view, text, permanent, st.asException());
  }

  // ---- the views' state, as sessions publish to it ----

  private record Waiter(long lsn, CompletableFuture<Void> future) {}

  @SuppressWarnings({"unchecked", "rawtypes"})
  static void build(View<?> v, View.Snap<?> snap) {
    ((View) v).build((View.Snap) snap);
  }

  StampedLock lock() {
    return lock;
  }

  StatecastException checkEpoch(View<?> v, Entry e) {
    try {
      JsonNode end = JSON.readTree(e.getValue().toByteArray());
      long rows = end.path("rows").asLong(-1);
      String hash = end.path("hash").asText("");
      String have = String.format("%016x", v.hashSum());
      boolean same;
      try {
        same = rows == v.rowCount() && Long.parseUnsignedLong(hash, 16) == v.hashSum();
      } catch (NumberFormatException ex) {
        same = false;
      }
      if (same) {
        return null;
      }
      LOG.warn("view {}: epoch {} ends with {} rows, hash {}; the cache holds {} rows, hash {}: resync",
          v.name(), end.path("epoch").asLong(), rows, hash, v.rowCount(), have);
      return new StatecastException(v.name(), "view " + v.name() + ": epoch " + end.path("epoch").asLong()
          + " check failed (" + rows + " rows, hash " + hash + "; held " + v.rowCount() + ", " + have
          + "): subscribing for a snapshot", false, null);
    } catch (java.io.IOException ex) {
      return new StatecastException(v.name(), "view " + v.name() + ": epoch-end record at index "
          + e.getIndex() + " does not parse: " + ex.getMessage(), false, ex);
    }
  }

  void setPosition(Entry e) {
    try {
      JsonNode p = JSON.readTree(e.getValue().toByteArray());
      long lsn = p.hasNonNull("lsn") ? Position.parseLsn(p.get("lsn").asText()) : Position.NONE;
      Map<String, Long> behind = new HashMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = p.path("behind").fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> b = it.next();
        behind.put(b.getKey(), Position.parseLsn(b.getValue().asText()));
      }
      Set<String> stale = new HashSet<>();
      for (JsonNode s : p.path("stale")) {
        stale.add(s.asText());
      }
      position = new Position(lsn, Map.copyOf(behind), Set.copyOf(stale));
    } catch (java.io.IOException | IllegalArgumentException ex) {
      LOG.warn("stream {}: position record at index {} does not parse: {}", cfg.stream, e.getIndex(), ex.toString());
    }
  }

  void checkWaiters() {
    if (waiters.isEmpty()) {
      return;
    }
    Position p = position;
    for (Iterator<Waiter> it = waiters.iterator(); it.hasNext(); ) {
      Waiter w = it.next();
      String staleView = null;
      boolean done = p.lsn() != Position.NONE && p.lsn() >= w.lsn;
      for (String v : views.keySet()) {
        if (p.stale().contains(v)) {
          staleView = v;
        }
        if (p.of(v) < w.lsn) {
          done = false;
        }
      }
      if (done) {
        w.future.complete(null);
        it.remove();
      } else if (staleView != null) {
        w.future.completeExceptionally(new StatecastException(staleView, "view " + staleView
            + " is stale (stopped at the distributor): the cache cannot reach " + Position.formatLsn(w.lsn), false, null));
        it.remove();
      }
    }
  }

  // ---- the state file ----

  /** The selection each view is held with, as the state file records it. */
  private Map<String, String> stateSelections() {
    Map<String, String> out = new LinkedHashMap<>();
    for (View<?> v : views.values()) {
      out.put(v.name(), v.selection().map(Selection::stateString).orElse(""));
    }
    return out;
  }

  /**
   * On the receive thread, before the first subscription: the state file, read and verified
   * whole, if it is usable; the subscription then resumes at its index (and topic ID), and
   * buildState, the next task, puts its rows into the views.
   */
  private void loadState() {
    loading = store.verify(stateSelections());
    if (loading != null) {
      topic = loading.content().topic();
    }
  }

  /** On the receive thread, once the first subscription started: the loading file's rows into the views. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private void buildState() {
    StateStore.Loaded l = loading;
    if (l == null) {
      return;
    }
    long t0 = System.nanoTime();
    Map<View<?>, View.Snap<?>> snap = new LinkedHashMap<>();
    View<?>[] cur = new View<?>[1];
    View.Snap<?>[] into = new View.Snap<?>[1];
    StateFile.Content c = store.rows(l, stateSelections(), new StateFile.Sink() {
      @Override
      public void view(String name, int n) {
        cur[0] = views.get(name);
        into[0] = cur[0].newSnap(n);
        snap.put(cur[0], into[0]);
      }

      @Override
      public void row(String key, byte[] raw, long hash) {
        ((View) cur[0]).snapLoad((View.Snap) into[0], key, raw, hash);
      }
    });
    loading = null;
    if (c == null) {
      // Verified a moment ago: only a selection changed since (reselect) gets here. The
      // subscription that resumed at the file's index must not stand.
      topic = new byte[0];
      if (session != null) {
        session.cancel("state file not loaded");
        session = null;
        connect();
      }
      return;
    }
    long rows = 0;
    for (Map.Entry<View<?>, View.Snap<?>> e : snap.entrySet()) {
      build(e.getKey(), e.getValue()); // before the write lock
      rows += e.getValue().hashes.size();
    }
    List<Runnable> changes = new ArrayList<>();
    long stamp = lock.writeLock();
    try {
      for (Map.Entry<View<?>, View.Snap<?>> e : snap.entrySet()) {
        ((View) e.getKey()).replace((View.Snap) e.getValue(), changes);
      }
      topic = c.topic();
      position = c.position();
      applied = c.index();
    } finally {
      lock.unlockWrite(stamp);
    }
    for (Runnable r : changes) {
      r.run();
    }
    LOG.info("stream {}: state file loaded, resuming at index {} ({} rows, {} ms to verify, {} ms to build)", cfg.stream,
        c.index(), rows, l.verifyMillis(), (System.nanoTime() - t0) / 1_000_000);
  }

  /**
   * On the receive thread: the applied state, for the state file; null when there is none
   * to write (nothing applied yet, or a state the client distrusts).
   */
  private StateStore.Cut cut() {
    if (applied < 0 || distrusted) {
      return null;
    }
    List<StateFile.ViewRows> rows = new ArrayList<>(views.size());
    for (View<?> v : views.values()) {
      HashTable.Rows r = v.stateRows();
      rows.add(new StateFile.ViewRows(v.name(), v.selection().map(Selection::stateString).orElse(""),
          r.keys(), r.raws(), r.size()));
    }
    return new StateStore.Cut(applied, topic.clone(), position, position != Position.UNKNOWN, rows,
        listeners.barrier());
  }

  private static String defaultInstanceId() {
    String host;
    try {
      host = InetAddress.getLocalHost().getHostName();
    } catch (Exception e) {
      host = "unknown";
    }
    long pid = ProcessHandle.current().pid();
    byte[] r = new byte[4];
    new SecureRandom().nextBytes(r);
    StringBuilder b = new StringBuilder(host).append('-').append(pid).append('-');
    for (byte x : r) {
      b.append(String.format("%02x", x));
    }
    return b.toString();
  }

  /** The gRPC transport a client connects to its players with ({@link Builder#transport}). */
  public enum Transport {
    /** grpc-netty-shaded, a dependency of the client: the default. */
    NETTY,
    /**
     * grpc-okhttp, an optional dependency a service adds (at the version of its other
     * io.grpc artifacts). It loads fewer classes than Netty when the first connection is
     * made, which shortens a cold start (docs/benchmarks/java-client.md, "The OkHttp
     * transport"); TLS is the JDK's. Not with {@link Builder#many}, whose connections are
     * Netty's.
     */
    OKHTTP
  }

  /**
   * The client's configuration. Required: {@link #addresses} and {@link #stream}; every
   * other setting has the default its method names.
   */
  public static final class Builder {
    private List<String> addresses = List.of();
    private String stream;
    private String service;
    private String instanceId;
    private boolean tls;
    private File tlsCa;
    private File certFile;
    private File keyFile;
    private String serverName;
    private Supplier<String> token;
    private Executor listenerExecutor;
    private int listenerThreads = 4;
    private Duration backoffMin = Duration.ofMillis(100);
    private Duration backoffMax = Duration.ofSeconds(5);
    private int maxBatchEntries = 4096;
    private int maxReceiveBytes = 4 << 20;
    private int recvWindow = 8 << 20;
    private java.nio.file.Path stateDir;
    private byte[] stateKey;
    private Duration persistInterval = Duration.ofSeconds(30);
    private Duration readyIdle = Duration.ofSeconds(1);
    private Many many;
    private Transport transport = Transport.NETTY;

    private Builder() {}

    /** The gRPC transport (default {@link Transport#NETTY}). */
    public Builder transport(Transport t) {
      this.transport = java.util.Objects.requireNonNull(t, "transport");
      return this;
    }

    /**
     * Subscribes as a channel of the {@link Many}'s stream to each player instead of a
     * Subscribe stream of its own: for a process that holds many clients at once (see
     * {@link Many}). The clients of one {@code Many} should have the same TLS and token
     * settings.
     */
    public Builder many(Many m) {
      this.many = m;
      return this;
    }

    /**
     * Where the client keeps its state file (schemas/README.md, "State files"): its views and
     * position, written every {@link #persistInterval} and at {@link #close()}, so that a
     * restart resumes from the player at the file's index instead of taking a snapshot. The
     * directory is this client's alone. A file that cannot be used (corrupt, another stream,
     * a view missing or held with another selection) is logged and ignored: the client then
     * bootstraps from a snapshot. Each row's value is kept as received besides its decoded
     * value, which costs the values' size in memory.
     */
    public Builder stateDir(java.nio.file.Path dir) {
      this.stateDir = dir;
      return this;
    }

    /**
     * A secret of at least 32 bytes that authenticates the state file (HMAC-SHA256): the
     * client loads only a file written under it, so that whoever can write the directory
     * cannot make it serve forged rows. Needs {@link #stateDir}.
     */
    public Builder stateKey(byte[] key) {
      this.stateKey = key == null ? null : key.clone();
      return this;
    }

    /**
     * After resuming (from a state file, or after a reconnection before the first ready),
     * with a player that sends no head_index: the initial state counts as caught up once no
     * frame arrived for this long (default 1 s). A player that sends one decides by it.
     */
    public Builder readyIdle(Duration idle) {
      this.readyIdle = idle;
      return this;
    }

    /** How often the state file is written (default 30 s); {@link #close()} writes one too. */
    public Builder persistInterval(Duration every) {
      this.persistInterval = every;
      return this;
    }

    /**
     * The HTTP/2 flow-control window of the connection (default 8 MiB): how much the player
     * may send before the client has read it; a snapshot arrives at most a window per
     * round trip.
     */
    public Builder recvWindow(int bytes) {
      this.recvWindow = bytes;
      return this;
    }

    /**
     * The players' addresses ({@code host:port}), tried in turn on failure; or one gRPC
     * target such as {@code dns:///players.ns.svc:7070}, whose resolved addresses gRPC tries.
     */
    public Builder addresses(String... addrs) {
      this.addresses = List.of(addrs);
      return this;
    }

    /** The stream to subscribe to. */
    public Builder stream(String stream) {
      this.stream = stream;
      return this;
    }

    /** The service the client belongs to, shared by its replicas (default: the instance id). */
    public Builder service(String service) {
      this.service = service;
      return this;
    }

    /** The instance id, unique per process (default: hostname, pid and a random suffix). */
    public Builder instanceId(String id) {
      this.instanceId = id;
      return this;
    }

    /** TLS, verifying the player with the system's trust store. */
    public Builder tls() {
      this.tls = true;
      return this;
    }

    /** TLS, verifying the player's certificate with the CA certificates in a PEM file. */
    public Builder tls(File caPem) {
      this.tls = true;
      this.tlsCa = caPem;
      return this;
    }

    /** Mutual TLS: the client certificate chain and its PKCS#8 private key, PEM files. */
    public Builder clientCertificate(File certPem, File pkcs8KeyPem) {
      this.tls = true;
      this.certFile = certPem;
      this.keyFile = pkcs8KeyPem;
      return this;
    }

    /** The name the player's certificate is checked against (default: the address's host). */
    public Builder serverName(String name) {
      this.serverName = name;
      return this;
    }

    /** A bearer token, asked for at every subscription (so a rotated token is picked up). */
    public Builder token(Supplier<String> token) {
      this.token = token;
      return this;
    }

    /** Where listeners run (default: a pool of {@link #listenerThreads} the client owns). */
    public Builder listenerExecutor(Executor executor) {
      this.listenerExecutor = executor;
      return this;
    }

    /** The size of the client's own listener pool (default 4). */
    public Builder listenerThreads(int n) {
      this.listenerThreads = n;
      return this;
    }

    /** The reconnect backoff: jittered, doubling from min to max (defaults 100 ms, 5 s). */
    public Builder backoff(Duration min, Duration max) {
      this.backoffMin = min;
      this.backoffMax = max;
      return this;
    }

    /** Hello.max_batch_entries (default 4096). */
    public Builder maxBatchEntries(int n) {
      this.maxBatchEntries = n;
      return this;
    }

    /** The largest message received, sent as Hello.max_message_bytes (default 4 MiB). */
    public Builder maxReceiveBytes(int n) {
      this.maxReceiveBytes = n;
      return this;
    }

    /**
     * Builds the client (not started).
     *
     * @throws IllegalArgumentException naming the setting that is missing or wrong
     */
    public StatecastClient build() {
      if (addresses.isEmpty()) {
        throw new IllegalArgumentException("addresses: at least one player address is required");
      }
      if (stream == null || stream.isEmpty()) {
        throw new IllegalArgumentException("stream: required");
      }
      if (backoffMin.isNegative() || backoffMin.isZero() || backoffMax.compareTo(backoffMin) < 0) {
        throw new IllegalArgumentException("backoff: min must be > 0 and <= max");
      }
      if (maxReceiveBytes < 64 << 10) {
        throw new IllegalArgumentException("maxReceiveBytes: " + maxReceiveBytes + " is below 64 KiB");
      }
      if (listenerThreads < 1) {
        throw new IllegalArgumentException("listenerThreads: must be >= 1");
      }
      if (transport == Transport.OKHTTP) {
        if (many != null) {
          throw new IllegalArgumentException("transport OKHTTP: a Many's clients connect through its own Netty transport");
        }
        try {
          Class.forName("io.grpc.okhttp.OkHttpChannelBuilder", false, StatecastClient.class.getClassLoader());
        } catch (ClassNotFoundException e) {
          throw new IllegalArgumentException("transport OKHTTP: io.grpc:grpc-okhttp is not on the class path (an optional dependency: add it)", e);
        }
      }
      if (stateKey != null && stateDir == null) {
        throw new IllegalArgumentException("stateKey: needs stateDir (it authenticates the state file)");
      }
      if (stateKey != null && stateKey.length < StateFile.MIN_KEY_BYTES) {
        throw new IllegalArgumentException("stateKey: " + stateKey.length + " bytes, at least " + StateFile.MIN_KEY_BYTES);
      }
      if (readyIdle == null || readyIdle.isNegative() || readyIdle.isZero()) {
        throw new IllegalArgumentException("readyIdle: must be > 0");
      }
      if (persistInterval == null || persistInterval.isNegative() || persistInterval.isZero()) {
        throw new IllegalArgumentException("persistInterval: must be > 0");
      }
      return new StatecastClient(this);
    }
  }
}
