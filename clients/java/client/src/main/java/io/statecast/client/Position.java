package io.statecast.client;

import java.util.Map;
import java.util.Set;

/**
 * A source position (PostgreSQL WAL position, LSN) and the views that are not at it, as
 * carried by the stream's position records (schemas/README.md, "Source transactions and the
 * source position").
 *
 * @param lsn the stream's position, {@link #NONE} when unknown (polling, or none seen)
 * @param behind views at a position of their own, earlier than {@code lsn}
 * @param stale views the position does not cover
 */
public record Position(long lsn, Map<String, Long> behind, Set<String> stale) {
  /** No source position. */
  public static final long NONE = -1;

  static final Position UNKNOWN = new Position(NONE, Map.of(), Set.of());

  /**
   * Parses PostgreSQL's text form of a WAL position ({@code 16/B374D848}).
   *
   * @throws IllegalArgumentException naming the text when it is not one
   */
  public static long parseLsn(String text) {
    int slash = text.indexOf('/');
    if (slash <= 0 || slash == text.length() - 1) {
      throw new IllegalArgumentException("source position " + text + ": not of the form X/Y (hex)");
    }
    try {
      long hi = Long.parseLong(text.substring(0, slash), 16);
      long lo = Long.parseLong(text.substring(slash + 1), 16);
      if (hi > 0xFFFFFFFFL || lo > 0xFFFFFFFFL || hi < 0 || lo < 0) {
        throw new NumberFormatException("out of range");
      }
      return hi << 32 | lo;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("source position " + text + ": " + e.getMessage(), e);
    }
  }

  /** The text form of a position parsed by {@link #parseLsn}. */
  public static String formatLsn(long lsn) {
    return Long.toHexString(lsn >>> 32).toUpperCase() + "/" + Long.toHexString(lsn & 0xFFFFFFFFL).toUpperCase();
  }

  /** The position of {@code view}: its entry in {@code behind}, else {@code lsn}. */
  public long of(String view) {
    Long b = behind.get(view);
    return b == null ? lsn : b;
  }
}
