package io.statecast.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.List;
import org.junit.jupiter.api.Test;

class KeysTest {
  @Test
  void escapesAsTheRecordFormat() {
    // record.EncodeKey("ev|x", "a|b", `c\d`) is ev\|x|a\|b|c\\d
    String recordKey = Keys.escape("ev|x") + "|" + Keys.join("a|b", "c\\d");
    assertEquals("ev\\|x|a\\|b|c\\\\d", recordKey);
    assertEquals("a\\|b|c\\\\d", Keys.rest(recordKey));
    assertEquals(List.of("a|b", "c\\d"), Keys.split(Keys.rest(recordKey)));
  }

  @Test
  void distinguishesSplitsOfTheSameText() {
    assertEquals(false, Keys.join("a|b", "c").equals(Keys.join("a", "b|c")));
  }

  @Test
  void restIsNullWithoutAViewPrefix() {
    assertNull(Keys.rest("noprefix"));
  }
}
