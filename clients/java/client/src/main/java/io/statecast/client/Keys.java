package io.statecast.client;

import java.util.ArrayList;
import java.util.List;

/**
 * The record key format (schemas/README.md, "Record key"): {@code esc(view) "|" esc(k1) ["|"
 * esc(k2) ...]} with {@code \} written {@code \\} and {@code |} written {@code \|}.
 *
 * <p>A view holds each row under its key without the view prefix: the escaped key texts
 * joined by {@code |} ({@link #join}); a one-column key is escaped too.
 */
public final class Keys {
  private Keys() {}

  /** Escapes one key text or view name. */
  public static String escape(String s) {
    if (s.indexOf('\\') < 0 && s.indexOf('|') < 0) {
      return s;
    }
    StringBuilder b = new StringBuilder(s.length() + 4);
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\\' || c == '|') {
        b.append('\\');
      }
      b.append(c);
    }
    return b.toString();
  }

  /** The key a view holds a row under, from the row's key texts in the view's key order. */
  public static String join(String... keyTexts) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < keyTexts.length; i++) {
      if (i > 0) {
        b.append('|');
      }
      b.append(escape(keyTexts[i]));
    }
    return b.toString();
  }

  /** The key texts of a view-held key (the inverse of {@link #join}). */
  public static List<String> split(String key) {
    List<String> out = new ArrayList<>();
    StringBuilder cur = new StringBuilder();
    for (int i = 0; i < key.length(); i++) {
      char c = key.charAt(i);
      if (c == '\\' && i + 1 < key.length()) {
        cur.append(key.charAt(++i));
      } else if (c == '|') {
        out.add(cur.toString());
        cur.setLength(0);
      } else {
        cur.append(c);
      }
    }
    out.add(cur.toString());
    return out;
  }

  /**
   * The view-held part of a record key: what follows the first unescaped {@code |}, or null
   * when the key has none.
   */
  static String rest(String recordKey) {
    for (int i = 0; i < recordKey.length(); i++) {
      char c = recordKey.charAt(i);
      if (c == '\\') {
        i++;
      } else if (c == '|') {
        return recordKey.substring(i + 1);
      }
    }
    return null;
  }
}
