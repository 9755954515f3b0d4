package io.statecast.client.micrometer;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.statecast.client.StatecastClient;
import io.statecast.client.View;
import java.util.List;

/**
 * The metrics of a {@link StatecastClient} in Micrometer, named as the Go client's
 * Prometheus adapter names them ({@code statecast_cache_*}), each tagged with the stream:
 *
 * <ul>
 *   <li>{@code statecast.cache.applied.index} (gauge): the index applied;
 *   <li>{@code statecast.cache.head.index} (gauge): the stream's last index the player
 *       reported;
 *   <li>{@code statecast.cache.lag.entries} (gauge): head minus applied, 0 when caught up;
 *   <li>{@code statecast.cache.ready} (gauge): 1 once the initial state is complete;
 *   <li>{@code statecast.cache.reconnects} and {@code statecast.cache.resyncs}
 *       (counters): subscriptions after the first, and snapshots that replaced held state;
 *   <li>{@code statecast.cache.state.writes} and {@code statecast.cache.state.write.errors}
 *       (counters): state files written and writes that failed (0 without a state directory);
 *   <li>{@code statecast.cache.rows} (gauge, tagged with the view): the rows a view holds.
 * </ul>
 *
 * <p>This class is the module {@code io.statecast:statecast-client-micrometer}, which
 * brings {@code io.micrometer:micrometer-core}; the client itself has no Micrometer in it.
 *
 * <pre>{@code
 * new StatecastMetrics(client, List.of(events, markets)).bindTo(registry);
 * }</pre>
 *
 * <p>The meters read the client's state when the registry samples them (no thread, nothing
 * to close); they hold the client and the views strongly.
 */
public final class StatecastMetrics implements MeterBinder {
  private final StatecastClient client;
  private final List<View<?>> views;
  private final Tags tags;

  /**
   * Metrics of {@code client} and, per view, of {@code views}, tagged {@code stream} and
   * {@code extra}.
   */
  public StatecastMetrics(StatecastClient client, List<? extends View<?>> views, Tag... extra) {
    this.client = client;
    this.views = List.copyOf(views);
    this.tags = Tags.of("stream", client.stream()).and(extra);
  }

  @Override
  public void bindTo(MeterRegistry registry) {
    Gauge.builder("statecast.cache.applied.index", client, StatecastClient::appliedIndex)
        .description("the index of the stream this cache has applied").tags(tags).register(registry);
    Gauge.builder("statecast.cache.head.index", client, StatecastClient::headIndex)
        .description("the stream's last index, as the player last reported it").tags(tags).register(registry);
    Gauge.builder("statecast.cache.lag.entries", client, c -> Math.max(0, c.headIndex() - c.appliedIndex()))
        .description("indexes between the stream's last one and the one applied").tags(tags).register(registry);
    Gauge.builder("statecast.cache.ready", client, c -> c.isReady() ? 1 : 0)
        .description("1 once the initial state is complete").tags(tags).register(registry);
    FunctionCounter.builder("statecast.cache.reconnects", client, StatecastClient::reconnects)
        .description("subscriptions after the first (failovers, reconnections)").tags(tags).register(registry);
    FunctionCounter.builder("statecast.cache.resyncs", client, StatecastClient::resyncs)
        .description("snapshots that replaced held state (a resync, an epoch check)").tags(tags).register(registry);
    FunctionCounter.builder("statecast.cache.state.writes", client, StatecastClient::stateWrites)
        .description("state files written").tags(tags).register(registry);
    FunctionCounter.builder("statecast.cache.state.write.errors", client, StatecastClient::stateWriteErrors)
        .description("state file writes that failed (each logged with its cause)").tags(tags).register(registry);
    for (View<?> v : views) {
      Gauge.builder("statecast.cache.rows", v, View::size)
          .description("the rows the view holds").tags(tags.and("view", v.name())).register(registry);
    }
  }
}
