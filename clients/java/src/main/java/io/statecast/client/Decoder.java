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
}
