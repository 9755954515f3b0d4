package io.statecast.client;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs tasks on an executor, one at a time and in submission order per key, in parallel
 * across keys (the key-ordered parallelism of the parallel consumer).
 */
final class KeyedExecutor {
  private static final Logger LOG = LoggerFactory.getLogger(KeyedExecutor.class);
  private final Executor executor;
  private final Map<String, ArrayDeque<Runnable>> queues = new HashMap<>();

  KeyedExecutor(Executor executor) {
    this.executor = executor;
  }

  void submit(String key, Runnable task) {
    synchronized (queues) {
      ArrayDeque<Runnable> q = queues.get(key);
      if (q != null) {
        q.add(task);
        return;
      }
      q = new ArrayDeque<>();
      q.add(task);
      queues.put(key, q);
    }
    try {
      executor.execute(() -> drain(key));
    } catch (RuntimeException e) {
      synchronized (queues) {
        queues.remove(key);
      }
      LOG.debug("listener task for key {} rejected: {}", key, e.toString());
    }
  }

  /**
   * Completes once every task submitted before the call has run: a marker goes to the end
   * of each key's queue (the queues run in order), and the last marker to run completes it.
   * A task the executor rejected never runs: the caller bounds its wait.
   */
  CompletableFuture<Void> barrier() {
    CompletableFuture<Void> done = new CompletableFuture<>();
    synchronized (queues) {
      if (queues.isEmpty()) {
        done.complete(null);
        return done;
      }
      AtomicInteger left = new AtomicInteger(queues.size());
      Runnable marker = () -> {
        if (left.decrementAndGet() == 0) {
          done.complete(null);
        }
      };
      for (ArrayDeque<Runnable> q : queues.values()) {
        q.add(marker);
      }
    }
    return done;
  }

  private void drain(String key) {
    for (;;) {
      Runnable task;
      synchronized (queues) {
        ArrayDeque<Runnable> q = queues.get(key);
        task = q.peek();
        if (task == null) {
          queues.remove(key);
          return;
        }
      }
      try {
        task.run();
      } catch (RuntimeException e) {
        LOG.error("change listener failed on key {}", key, e);
      }
      synchronized (queues) {
        queues.get(key).poll();
      }
    }
  }
}
