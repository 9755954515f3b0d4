package io.statecast.client.conformance;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.statecast.client.Many;
import io.statecast.client.Selection;
import io.statecast.client.StatecastClient;
import io.statecast.client.View;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Java client's driver for the conformance suite (the Go package conformance): reads a
 * config line and then commands as JSON lines on stdin, writes events as JSON lines on
 * stdout (conformance/doc.go, "Line protocol").
 */
public final class Driver {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

  private Driver() {}

  private static synchronized void emit(ObjectNode n) {
    OUT.println(n.toString());
  }

  private static ObjectNode event(String name) {
    return JSON.createObjectNode().put("event", name);
  }

  /** The selection of a view's config ({filter, shard_index, shard_count, columns}), or null. */
  private static Selection selection(JsonNode n) {
    if (n.isMissingNode() || n.isNull()) {
      return null;
    }
    Selection.Builder b = Selection.builder().filter(n.path("filter").asText(""));
    if (n.path("shard_count").asInt(0) > 0) {
      b.shard(n.path("shard_index").asInt(0), n.path("shard_count").asInt());
    }
    List<String> cols = new ArrayList<>();
    n.path("columns").forEach(c -> cols.add(c.asText()));
    if (!cols.isEmpty()) {
      b.columns(cols.toArray(new String[0]));
    }
    return b.build();
  }

  /** Runs the driver. */
  public static void main(String[] args) throws Exception {
    // The test class path's simplelogger.properties silences the unit tests; a driver's
    // log goes to stderr, which the suite shows when a scenario fails.
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "info");
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    JsonNode cfg = JSON.readTree(in.readLine());
    List<String> addrs = new ArrayList<>();
    cfg.path("addresses").forEach(a -> addrs.add(a.asText()));
    StatecastClient.Builder b = StatecastClient.builder()
        .addresses(addrs.toArray(new String[0]))
        .stream(cfg.path("stream").asText())
        .backoff(Duration.ofMillis(10), Duration.ofMillis(200));
    if (cfg.hasNonNull("instance_id") && !cfg.get("instance_id").asText().isEmpty()) {
      b.instanceId(cfg.get("instance_id").asText());
    }
    if (cfg.hasNonNull("service") && !cfg.get("service").asText().isEmpty()) {
      b.service(cfg.get("service").asText());
    }
    if (!cfg.path("ca_file").asText("").isEmpty()) {
      b.tls(new File(cfg.get("ca_file").asText()));
    }
    if (!cfg.path("cert_file").asText("").isEmpty()) {
      b.clientCertificate(new File(cfg.get("cert_file").asText()), new File(cfg.get("key_file").asText()));
    }
    if (!cfg.path("state_dir").asText("").isEmpty()) {
      b.stateDir(java.nio.file.Path.of(cfg.get("state_dir").asText()));
      if (cfg.path("persist_interval_ms").asInt(0) > 0) {
        b.persistInterval(Duration.ofMillis(cfg.get("persist_interval_ms").asInt()));
      }
    }
    String transport = System.getProperty("statecast.conformance.transport");
    if (transport != null) {
      b.transport(StatecastClient.Transport.valueOf(transport));
    }
    Many many = cfg.path("many").asBoolean(false) ? new Many() : null;
    if (many != null) {
      b.many(many);
    }
    String token = cfg.path("token").asText("");
    if (!token.isEmpty()) {
      b.token(() -> token);
    }
    StatecastClient c = b.build();
    Map<String, View<String>> views = new LinkedHashMap<>();
    for (JsonNode v : cfg.path("views")) {
      View<String> view = c.rawView(v.asText(), selection(cfg.path("selections").path(v.asText())));
      views.put(v.asText(), view);
      if (cfg.path("no_listener").asBoolean(false)) {
        continue;
      }
      view.addListener((key, oldV, newV) -> emit(event("change").put("view", view.name()).put("key", key)
          .put("old", oldV).put("new", newV)));
    }
    long started = System.nanoTime();
    c.start();
    c.awaitReady().whenComplete((x, err) -> {
      if (err != null) {
        emit(event("stopped").put("error", String.valueOf(err.getMessage())));
      } else {
        emit(event("ready").put("applied", c.appliedIndex())
            .put("elapsed_ms", (System.nanoTime() - started) / 1_000_000));
      }
    });
    for (String line; (line = in.readLine()) != null; ) {
      JsonNode cmd = JSON.readTree(line);
      switch (cmd.path("cmd").asText()) {
        case "dump" -> {
          ObjectNode d = event("dump");
          d.put("applied", c.appliedIndex()).put("ready", c.isReady());
          ObjectNode vs = d.putObject("views");
          for (Map.Entry<String, View<String>> e : views.entrySet()) {
            ObjectNode m = vs.putObject(e.getKey());
            e.getValue().entries().forEach(m::put);
          }
          emit(d);
        }
        case "await_for" -> {
          String lsn = cmd.path("lsn").asText();
          c.awaitFor(lsn).whenComplete((x, err) -> {
            if (err != null) {
              emit(event("error").put("error", String.valueOf(err.getMessage())));
            } else {
              emit(event("reached").put("lsn", lsn));
            }
          });
        }
        case "reselect" -> {
          View<String> view = views.get(cmd.path("view").asText());
          if (view == null) {
            emit(event("error").put("error", "no view " + cmd.path("view").asText()));
            continue;
          }
          view.reselect(selection(cmd.path("selection"))).whenComplete((x, err) -> {
            if (err != null) {
              emit(event("error").put("error", String.valueOf(err.getMessage())));
            } else {
              emit(event("reselected").put("view", view.name()));
            }
          });
        }
        case "close" -> {
          c.close();
          if (many != null) {
            many.close();
          }
          List<String> left = new ArrayList<>();
          for (Thread t : Thread.getAllStackTraces().keySet()) {
            String n = t.getName();
            if (t.isAlive() && (n.startsWith("statecast-") || n.startsWith("grpc-") || n.startsWith("globalEventExecutor")
                || n.startsWith("nioEventLoop"))) {
              left.add(n);
            }
          }
          emit(event("closed").put("error", left.isEmpty() ? "" : "threads left after close: " + left));
          System.exit(0);
        }
        default -> emit(event("error").put("error", "unknown command " + cmd.path("cmd").asText()));
      }
    }
    c.close();
  }
}
