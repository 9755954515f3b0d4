package io.statecast.client;

import io.grpc.netty.shaded.io.netty.util.concurrent.GlobalEventExecutor;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** The end of the threads a client or a Many started, at its close. */
final class Threads {
  private Threads() {}

  /**
   * Waits until each of threads (guarded by itself) has ended, and Netty's global executor
   * too: it runs an event loop's termination, and its thread ends after a second without
   * tasks.
   */
  static void joinAll(List<Thread> threads) throws InterruptedException {
    List<Thread> ts;
    synchronized (threads) {
      ts = new ArrayList<>(threads);
    }
    for (Thread t : ts) {
      if (t != Thread.currentThread()) {
        t.join(5000);
      }
    }
    GlobalEventExecutor.INSTANCE.awaitInactivity(5, TimeUnit.SECONDS);
  }
}
