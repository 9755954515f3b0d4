package io.statecast.client;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Executor;
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
