package io.statecast.client;

/**
 * Receives the changes a view applies.
 *
 * <p>Called on the client's listener executor after the change is visible to readers; the
 * changes of one key arrive in the order they were applied, one at a time; changes of
 * different keys may run in parallel. A listener must not block for long: the changes of its
 * key queue behind it (the view does not wait for listeners).
 *
 * @param <T> the view's value type
 */
@FunctionalInterface
public interface ChangeListener<T> {
  /**
   * One key changed.
   *
   * @param key the key the view holds the row under (see {@link Keys})
   * @param oldValue the value before, null when the key was absent
   * @param newValue the value after, null when the key was deleted
   */
  void onChange(String key, T oldValue, T newValue);
}
