package io.statecast.client;

import static io.statecast.client.FakePlayer.row;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.statecast.client.micrometer.StatecastMetrics;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The Micrometer binder (io.statecast.client.micrometer) reads what the client holds. */
class StatecastMetricsTest {
  @Test
  void metersFollowTheClient() throws Exception {
    try (FakePlayer player = new FakePlayer();
        StatecastClient client = StatecastClient.builder().addresses(player.addr()).stream("s").service("test")
            .instanceId("i-1").backoff(Duration.ofMillis(5), Duration.ofMillis(50)).build()) {
      View<String> events = client.rawView("events");
      MeterRegistry reg = new SimpleMeterRegistry();
      new StatecastMetrics(client, List.of(events)).bindTo(reg);
      assertEquals(0.0, reg.get("statecast.cache.ready").tag("stream", "s").gauge().value());
      client.start();
      FakePlayer.Sub s = player.next();
      s.hello();
      s.snapshot(10, row(3, "events", "a", "{}", false), row(7, "events", "b", "{}", false));
      client.awaitReady().get(20, TimeUnit.SECONDS);
      assertEquals(1.0, reg.get("statecast.cache.ready").gauge().value());
      assertEquals(10.0, reg.get("statecast.cache.applied.index").gauge().value());
      assertEquals(2.0, reg.get("statecast.cache.rows").tag("view", "events").gauge().value());
      assertEquals(0.0, reg.get("statecast.cache.resyncs").functionCounter().count());
      assertEquals(0.0, reg.get("statecast.cache.state.writes").functionCounter().count());
      assertEquals(0.0, reg.get("statecast.cache.state.write.errors").functionCounter().count());
      s.batch(row(12, "events", "c", "{}", false));
      s.awaitAck(12);
      assertEquals(12.0, reg.get("statecast.cache.applied.index").gauge().value());
      assertEquals(3.0, reg.get("statecast.cache.rows").tag("view", "events").gauge().value());
      assertEquals(Math.max(0, reg.get("statecast.cache.head.index").gauge().value() - 12.0),
          reg.get("statecast.cache.lag.entries").gauge().value());
    }
  }
}
