package io.statecast.client;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A client's state file ({@link StateFile}): loaded once at start, written on a thread of
 * its own from cuts the receive thread takes between publications.
 *
 * <p>A cut is written only once every change listener task queued before it has run, so
 * that a restart from the file never skips a change a listener had not yet seen: rows
 * loaded from the file are announced to the listeners as a snapshot's would be, which
 * covers the rows present, but a deletion applied before the cut is announced only by the
 * task queued for it.
 */
final class StateStore {
  private static final Logger LOG = LoggerFactory.getLogger(StateStore.class);
  /** How long a write waits for the listeners to run the changes before its cut. */
  private static final long HANDLED_WAIT_SECONDS = 30;

  /** What one write holds: a consistent state, and when the listeners have seen it. */
  record Cut(long index, byte[] topic, Position position, boolean positionSeen,
      List<StateFile.ViewRows> views, CompletableFuture<Void> handled) {}

  private final String stream;
  private final Path dir;
  private final byte[] key;
  private final ExecutorService writer;
  private final AtomicBoolean busy = new AtomicBoolean();
  final AtomicLong writes = new AtomicLong();
  final AtomicLong errors = new AtomicLong();

  StateStore(String stream, Path dir, byte[] key, ExecutorService writer) {
    this.stream = stream;
    this.dir = dir;
    this.key = key;
    this.writer = writer;
  }

  Path path() {
    return dir.resolve(StateFile.NAME);
  }

  /** A verified file: its bytes and what it holds besides the rows. */
  record Loaded(byte[] bytes, StateFile.Content content, long verifyMillis) {}

  /**
   * The file, read and verified whole for views (name to selection), or null when there is
   * none or it cannot be used (then the client bootstraps from a snapshot; the reason is
   * logged).
   */
  Loaded verify(Map<String, String> views) {
    long t0 = System.nanoTime();
    StateFile.removeTemps(dir);
    byte[] b;
    try {
      b = Files.readAllBytes(path());
    } catch (NoSuchFileException e) {
      return null;
    } catch (IOException e) {
      LOG.error("stream {}: state file {} not read; bootstrapping from a snapshot: {}", stream, path(), e.toString());
      return null;
    }
    try {
      StateFile.Content c = StateFile.read(b, stream, key, views, null);
      return new Loaded(b, c, (System.nanoTime() - t0) / 1_000_000);
    } catch (StateFile.BadFile e) {
      refused(e);
      return null;
    }
  }

  /** The rows of a verified file, given to sink; null (logged) when it no longer fits views. */
  StateFile.Content rows(Loaded l, Map<String, String> views, StateFile.Sink sink) {
    try {
      return StateFile.read(l.bytes(), stream, key, views, sink);
    } catch (StateFile.BadFile e) {
      refused(e);
      return null;
    }
  }

  private void refused(StateFile.BadFile e) {
    if (e.auth) {
      LOG.error("stream {}: state file {} refused: not authenticated by the state key; bootstrapping from a snapshot: {}",
          stream, path(), e.getMessage());
    } else {
      LOG.error("stream {}: state file {} ignored; bootstrapping from a snapshot: {}", stream, path(), e.getMessage());
    }
  }

  /** Whether a write is queued or running (a periodic cut is then not taken). */
  boolean busy() {
    return busy.get();
  }

  /** Writes cut on the writer thread, unless a write is queued or running already. */
  void submit(Cut cut) {
    if (!busy.compareAndSet(false, true)) {
      return;
    }
    try {
      writer.execute(() -> {
        try {
          write(cut);
        } finally {
          busy.set(false);
        }
      });
    } catch (java.util.concurrent.RejectedExecutionException e) {
      busy.set(false);
    }
  }

  /** Writes the last cut (null: none) after any write in progress, and ends the writer. */
  void close(Cut last) {
    if (last != null) {
      try {
        writer.execute(() -> write(last));
      } catch (java.util.concurrent.RejectedExecutionException e) {
        // closed already
      }
    }
    writer.shutdown();
    try {
      if (!writer.awaitTermination(HANDLED_WAIT_SECONDS + 10, TimeUnit.SECONDS)) {
        LOG.warn("stream {}: the last state file write did not end in time", stream);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void write(Cut cut) {
    long t0 = System.nanoTime();
    try {
      cut.handled().get(HANDLED_WAIT_SECONDS, TimeUnit.SECONDS);
      long n = StateFile.write(dir, stream, key, cut.index(), cut.topic(), cut.position(), cut.positionSeen(), cut.views());
      writes.incrementAndGet();
      LOG.debug("stream {}: state file written at index {} ({} bytes, {} ms)", stream, cut.index(), n,
          (System.nanoTime() - t0) / 1_000_000);
    } catch (TimeoutException e) {
      errors.incrementAndGet();
      LOG.error("stream {}: state file not written: the change listeners did not run the changes before index {} within {} s",
          stream, cut.index(), HANDLED_WAIT_SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Exception e) {
      errors.incrementAndGet();
      LOG.error("stream {}: state file not written: {}", stream, e.toString());
    }
  }
}
