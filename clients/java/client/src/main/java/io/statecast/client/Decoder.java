package io.statecast.client;

/**
 * Decodes a row's value (the JSON object of schemas/README.md, "Record value") into the
 * view's type. Called on the client's receive thread; must not keep {@code value}.
 *
 * @param <T> the view's value type
 */
@FunctionalInterface
public interface Decoder<T> {
  /**
   * Decodes one row.
   *
   * @param key the key the view holds the row under
   * @param value the row's JSON bytes
   * @return the decoded value, never null
   * @throws Exception when the bytes do not decode
   */
  T decode(String key, byte[] value) throws Exception;

  /**
   * Decodes one row from {@code buf[off, off + len)}, a buffer the client reuses: a decoder
   * that can read a slice (Jackson can) overrides this to spare a copy of each row of a
   * snapshot. The default copies the slice and calls {@link #decode(String, byte[])}.
   *
   * @param key the key the view holds the row under
   * @param buf the buffer; must not be kept or modified
   * @param off where the row's JSON bytes start
   * @param len how many bytes it has
   * @return the decoded value, never null
   * @throws Exception when the bytes do not decode
   */
  default T decode(String key, byte[] buf, int off, int len) throws Exception {
    return decode(key, java.util.Arrays.copyOfRange(buf, off, off + len));
  }
}
