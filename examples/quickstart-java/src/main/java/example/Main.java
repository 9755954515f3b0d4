package example;

import io.statecast.client.StatecastClient;
import io.statecast.client.View;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

/** The service of docs/quickstart-java.md: the demo's selections in memory, indexed by market. */
public class Main {
  /** A light object: the fields this service needs from a selections row. */
  public record Selection(long market_id, long id, String name, String price) {}

  public static void main(String[] args) throws Exception {
    String players = args.length > 0 ? args[0] : "127.0.0.1:7070";
    // 1. A client of the stream, and the views it keeps, typed.
    try (StatecastClient client = StatecastClient.builder()
        .addresses(players)
        .stream("sportsbook")
        .service("quickstart-java")
        .build()) {
      View<Selection> selections = client.view("selections", Selection.class);
      // 2. A secondary index: the values to find a row by.
      selections.addIndex("market", s -> List.of(Long.toString(s.market_id())));

      // 3. Start, and wait until the cache holds the views' whole initial state.
      client.start();
      client.awaitReady().get(1, TimeUnit.MINUTES);

      // 4. Reads are from memory. The keys are the key columns' texts joined by "|"
      // (market_id|id): sorted, they give the rows in key order.
      System.out.println(selections.size() + " selections");
      for (String key : new TreeSet<>(selections.keysBy("market", "10001"))) {
        Selection s = selections.get(key);
        System.out.println(s.name() + " " + s.price());
      }
    }
  }
}
