package io.statecast.client;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;

/**
 * Which part of a view a client receives and holds (protocol version 2, the protocol's
 * "Selections"): the rows that pass a CEL {@linkplain #filter() filter} over the view's
 * columns, one {@linkplain #shardIndex() hash shard} of its keys, and only some
 * {@linkplain #columns() columns} of each row. The player applies it on every path
 * (snapshot, live, recovery, resync): a row that starts passing arrives as a row, one that
 * stops passing as a tombstone inside the source transaction that moved it. An invalid
 * filter or an unknown column is refused when the client subscribes, the error naming the
 * view and the column.
 *
 * <pre>{@code
 * View<Event> tennis = client.view("events", Event.class,
 *     Selection.builder().filter("sport == \"tennis\"").columns("id", "name").build());
 * View<Market> mine = client.view("markets", Market.class, Selection.builder().shard(3, 16).build());
 * }</pre>
 *
 * <p>A selected view's epoch checks are skipped: an epoch's count and hash describe the whole
 * view.
 */
public final class Selection {
  private final String filter;
  private final int shardIndex;
  private final int shardCount;
  private final List<String> columns;

  private Selection(Builder b) {
    this.filter = b.filter;
    this.shardIndex = b.shardIndex;
    this.shardCount = b.shardCount;
    this.columns = Collections.unmodifiableList(new ArrayList<>(b.columns));
  }

  /** A new builder: every row and column until told otherwise. */
  public static Builder builder() {
    return new Builder();
  }

  /** The CEL filter ("" for every row). */
  public String filter() {
    return filter;
  }

  /** The shard received, of {@link #shardCount()}. */
  public int shardIndex() {
    return shardIndex;
  }

  /** The number of shards the view is cut into (0: not sharded). */
  public int shardCount() {
    return shardCount;
  }

  /** The columns received (empty: every column). */
  public List<String> columns() {
    return columns;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Selection s && filter.equals(s.filter) && shardIndex == s.shardIndex
        && shardCount == s.shardCount && columns.equals(s.columns);
  }

  @Override
  public int hashCode() {
    return Objects.hash(filter, shardIndex, shardCount, columns);
  }

  @Override
  public String toString() {
    StringBuilder b = new StringBuilder();
    if (!filter.isEmpty()) {
      b.append(filter);
    }
    if (shardCount > 0) {
      b.append(b.length() > 0 ? " " : "").append("shard ").append(shardIndex).append('/').append(shardCount);
    }
    if (!columns.isEmpty()) {
      b.append(b.length() > 0 ? " " : "").append("columns ").append(String.join(",", columns));
    }
    return b.toString();
  }

  /**
   * The selection as the state file records it (schemas/README.md, "State files"): the
   * filter, then {@code shard i/n}, then {@code columns} and the column names sorted, joined
   * by commas, each part after the first preceded by a space; "" for no selection.
   */
  String stateString() {
    StringBuilder b = new StringBuilder(filter);
    if (shardCount > 0) {
      b.append(b.length() > 0 ? " " : "").append("shard ").append(shardIndex).append('/').append(shardCount);
    }
    if (!columns.isEmpty()) {
      List<String> sorted = new ArrayList<>(columns);
      Collections.sort(sorted);
      b.append(b.length() > 0 ? " " : "").append("columns ").append(String.join(",", sorted));
    }
    return b.toString();
  }

  /** Builds a {@link Selection}. */
  public static final class Builder {
    private String filter = "";
    private int shardIndex;
    private int shardCount;
    private final LinkedHashSet<String> columns = new LinkedHashSet<>();

    private Builder() {}

    /**
     * The rows that pass {@code cel}, a CEL expression over the view's columns (each a
     * variable of its name, typed as its JSON value: integers, doubles, strings, bools,
     * null). A row on which it fails to evaluate does not pass.
     */
    public Builder filter(String cel) {
      this.filter = Objects.requireNonNull(cel, "filter").strip();
      return this;
    }

    /**
     * Shard {@code index} of {@code count}: the rows whose record key's xxhash64 mod {@code
     * count} is {@code index}. The {@code count} shards of a view partition its rows.
     *
     * @throws IllegalArgumentException unless {@code 0 <= index < count}
     */
    public Builder shard(int index, int count) {
      if (count <= 0 || index < 0 || index >= count) {
        throw new IllegalArgumentException("shard " + index + " of " + count + ": want 0 <= index < count");
      }
      this.shardIndex = index;
      this.shardCount = count;
      return this;
    }

    /**
     * Only these columns of each row (and the key); the filter may still read the others.
     *
     * @throws IllegalArgumentException on an empty name or one named twice
     */
    public Builder columns(String... names) {
      for (String c : names) {
        if (c == null || c.isEmpty()) {
          throw new IllegalArgumentException("columns: an empty column name");
        }
        if (!columns.add(c)) {
          throw new IllegalArgumentException("columns: " + c + " named twice");
        }
      }
      return this;
    }

    /** The selection. */
    public Selection build() {
      return new Selection(this);
    }
  }
}
