package io.statecast.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import statecast.v1.PlayerOuterClass.Entry;

/**
 * {@code View.get} while the view applies a steady stream of updates, beside a
 * {@code ConcurrentHashMap} updated at the same rate by a thread of its own (the baseline,
 * measured in the same run).
 *
 * <p>Run after {@code mvn package}: {@code java -cp
 * target/classes:target/test-classes:'target/lib/*' io.statecast.client.GetBench [keys]
 * [updates/s] [seconds]} (defaults 100000, 50000, 10).
 */
public final class GetBench {
  private GetBench() {}

  /** Runs the benchmark and prints its figures. */
  public static void main(String[] args) throws Exception {
    int keys = args.length > 0 ? Integer.parseInt(args[0]) : 100_000;
    int rate = args.length > 1 ? Integer.parseInt(args[1]) : 50_000;
    int seconds = args.length > 2 ? Integer.parseInt(args[2]) : 10;
    String[] names = new String[keys];
    for (int i = 0; i < keys; i++) {
      names[i] = Integer.toString(i);
    }
    // Each side runs twice, alternating, the first of each as warm-up.
    double chm = 0;
    double view = 0;
    for (int round = 0; round < 2; round++) {
      chm = baseline(names, rate, seconds);
      view = client(names, rate, seconds);
    }
    System.out.printf("keys %d, %d updates/s, %d s: ConcurrentHashMap.get %.1f ns, View.get %.1f ns, ratio %.2f%n",
        keys, rate, seconds, chm, view, view / chm);
  }

  private static String value(int k, int gen) {
    return "{\"id\":" + k + ",\"sport\":\"sport-" + (k % 50) + "\",\"name\":\"event " + k + " gen " + gen + "\"}";
  }

  record Event(long id, String sport, String name) {}

  /** ns per get on one reader thread while a writer applies rate updates per second. */
  private static double read(Getter g, String[] names, int seconds) {
    long ops = 0;
    long sink = 0;
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    long start = System.nanoTime();
    ThreadLocalRandom r = ThreadLocalRandom.current();
    while (true) {
      for (int i = 0; i < 1024; i++) {
        Object o = g.get(names[r.nextInt(names.length)]);
        if (o != null) {
          sink++;
        }
      }
      ops += 1024;
      long now = System.nanoTime();
      if (now >= end) {
        if (sink == 0) {
          throw new AssertionError("every get missed");
        }
        return (now - start) / (double) ops;
      }
    }
  }

  interface Getter {
    Object get(String k);
  }

  private static double baseline(String[] names, int rate, int seconds) throws Exception {
    ConcurrentHashMap<String, Event> m = new ConcurrentHashMap<>();
    com.fasterxml.jackson.databind.ObjectReader json = new com.fasterxml.jackson.databind.ObjectMapper()
        .configure(com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false)
        .readerFor(Event.class);
    for (int i = 0; i < names.length; i++) {
      m.put(names[i], json.readValue(value(i, 0)));
    }
    AtomicBoolean stop = new AtomicBoolean();
    Thread w = new Thread(() -> {
      int gen = 1;
      int batch = rate / 100;
      long next = System.nanoTime();
      while (!stop.get()) {
        for (int i = 0; i < batch; i++) {
          int k = ThreadLocalRandom.current().nextInt(names.length);
          try {
            m.put(names[k], json.readValue(value(k, gen)));
          } catch (java.io.IOException e) {
            throw new IllegalStateException(e);
          }
        }
        gen++;
        next += 10_000_000L;
        long sleep = next - System.nanoTime();
        if (sleep > 0) {
          java.util.concurrent.locks.LockSupport.parkNanos(sleep);
        }
      }
    });
    w.start();
    double ns = read(m::get, names, seconds);
    stop.set(true);
    w.join();
    return ns;
  }

  private static double client(String[] names, int rate, int seconds) throws Exception {
    try (FakePlayer player = new FakePlayer();
        StatecastClient c = StatecastClient.builder().addresses(player.addr()).stream("s").service("bench")
            .backoff(Duration.ofMillis(5), Duration.ofMillis(50)).build()) {
      View<Event> v = c.view("events", Event.class);
      c.start();
      FakePlayer.Sub s = player.next();
      s.hello();
      long index = 0;
      List<Entry> snap = new ArrayList<>(names.length);
      for (int i = 0; i < names.length; i++) {
        snap.add(FakePlayer.row(++index, "events", names[i], value(i, 0), false));
      }
      long x = index;
      s.send(statecast.v1.PlayerOuterClass.SubscribeResponse.newBuilder().setSnapshotBegin(
          statecast.v1.PlayerOuterClass.SnapshotBegin.newBuilder().setIndex(x)));
      for (int i = 0; i < snap.size(); i += 4096) {
        s.batch(snap.subList(i, Math.min(snap.size(), i + 4096)).toArray(new Entry[0]));
      }
      s.send(statecast.v1.PlayerOuterClass.SubscribeResponse.newBuilder().setSnapshotEnd(
          statecast.v1.PlayerOuterClass.SnapshotEnd.newBuilder().setIndex(x)));
      c.awaitReady().get(5, TimeUnit.MINUTES);
      AtomicBoolean stop = new AtomicBoolean();
      long[] next = {index};
      Thread w = new Thread(() -> {
        int gen = 1;
        int batch = rate / 100;
        long due = System.nanoTime();
        while (!stop.get()) {
          Entry[] es = new Entry[batch];
          for (int i = 0; i < batch; i++) {
            int k = ThreadLocalRandom.current().nextInt(names.length);
            es[i] = FakePlayer.row(++next[0], "events", names[k], value(k, gen), false);
          }
          s.batch(es);
          gen++;
          due += 10_000_000L;
          long sleep = due - System.nanoTime();
          if (sleep > 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(sleep);
          }
        }
      });
      w.start();
      double ns = read(v::get, names, seconds);
      stop.set(true);
      w.join();
      long applied = c.appliedIndex();
      if (applied < index) {
        throw new AssertionError("the client applied nothing of the updates");
      }
      System.out.printf("client applied %d updates in %d s (%.0f/s)%n", applied - index, seconds,
          (applied - index) / (double) seconds);
      return ns;
    }
  }
}
