package player

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// newEnvOn is newEnv on a broker of the test's own (testenv.DedicatedKafka): a compacted
// one-partition topic created there, and a producer.
func newEnvOn(t *testing.T, brokers []string) *env {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, kafkaconn.NewConfig("player-test"))
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	defer admin.Close()
	topic := testenv.UniqueName("player")
	compact := "compact"
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	e := &env{t: t, brokers: brokers, topic: topic, chk: checker.New(), last: -1}
	e.newProducer()
	return e
}

// newProducer gives e a new producer (after a broker restart: the old one's idempotent
// session may not survive it).
func (e *env) newProducer() {
	e.t.Helper()
	prod, err := sarama.NewSyncProducer(e.brokers, kafkaconn.ProducerConfig("player-test"))
	if err != nil {
		e.t.Fatalf("producer: %v", err)
	}
	e.t.Cleanup(func() { _ = prod.Close() })
	e.prod = prod
}

// readyz is what /readyz answers on h now.
func readyz(t *testing.T, h *httptest.Server) (int, Readiness) {
	t.Helper()
	resp, err := h.Client().Get(h.URL + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	defer resp.Body.Close()
	var r Readiness
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("readyz: %v", err)
	}
	return resp.StatusCode, r
}

// get is the body of what h answers to a GET of path.
func get(t *testing.T, h *httptest.Server, path string) string {
	t.Helper()
	resp, err := h.Client().Get(h.URL + path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}

// wantMetrics fails t, saying when, unless h's /metrics has every one of the lines.
func wantMetrics(t *testing.T, h *httptest.Server, when string, lines ...string) {
	t.Helper()
	metrics := get(t, h, "/metrics")
	for _, want := range lines {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics %s lacks %s", when, want)
		}
	}
}

// TestStatusClearsAfterKafkaOutage: the dedicated broker of a running player is killed
// and started again. While it is down the stream's state is error with the cause, /readyz
// is 503 naming it, health NOT_SERVING (it is the player's only stream) and
// statecast_player_stream_state says error. Once the broker is back and records flow, the
// state is ready again in the status, /readyz, health, the metric and the status page —
// the error stays visible as the last error, with its time, never as the state — and a
// target connected throughout receives the new records on the same stream.
func TestStatusClearsAfterKafkaOutage(t *testing.T) {
	k := testenv.DedicatedKafka(t)
	e := newEnvOn(t, k.Brokers)
	e.produce(50, []string{"a", "b"}, 20, newRand(11))
	tp := startPlayer(t, e, func(c *Config) { c.Kafka.Timeout = 2 * time.Second })
	h := httptest.NewServer(tp.p.Handler())
	defer h.Close()
	status := func() StreamStatus { return tp.p.streams["s"].Status() }

	c := newClient("through", e.chk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sessionErr := make(chan error, 1)
	go func() { sessionErr <- c.session(ctx, tp.addr, 0, nil) }()
	waitFor(t, 30*time.Second, "the client caught up", func() bool { return c.Applied() >= e.lastOffset() })
	if st := status(); st.State != StreamReady || st.FetchError != "" || st.LastError != "" {
		t.Fatalf("status before the outage: %+v", st)
	}

	k.Kill(t)
	waitFor(t, 60*time.Second, "the stream in error", func() bool { return status().State == StreamError })
	down := status()
	if down.FetchError == "" || down.LastError == "" || down.LastErrorAt.IsZero() || down.Ready {
		t.Errorf("status while the broker is down: %+v", down)
	}
	if code, r := readyz(t, h); code != 503 || r.Ready || r.Streams["s"] != StreamError || r.Errors["s"] == "" {
		t.Errorf("/readyz while the broker is down: %d %+v", code, r)
	}
	if hs := healthOf(tp.p); hs != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health %s while the broker is down, want NOT_SERVING", hs)
	}
	wantMetrics(t, h, "while the broker is down", `statecast_player_stream_state{state="error",stream="s"} 1`,
		`statecast_player_stream_state{state="ready",stream="s"} 0`)

	k.Start(t)
	e.newProducer()
	e.produce(30, []string{"a", "b"}, 20, newRand(12))
	last := e.lastOffset()
	waitFor(t, 90*time.Second, "the stream ready again with the new records", func() bool {
		st := status()
		return st.State == StreamReady && st.Current >= last
	})
	up := status()
	if up.FetchError != "" || !up.Ready || up.LastError == "" || up.LastErrorAt.Before(down.LastErrorAt) {
		t.Errorf("status once records flow again: %+v (while down: %+v)", up, down)
	}
	if code, r := readyz(t, h); code != 200 || !r.Ready || r.Streams["s"] != StreamReady || len(r.Errors) != 0 {
		t.Errorf("/readyz once records flow again: %d %+v", code, r)
	}
	waitFor(t, 10*time.Second, "health SERVING again", func() bool { return healthOf(tp.p) == healthpb.HealthCheckResponse_SERVING })
	wantMetrics(t, h, "once records flow again", `statecast_player_stream_state{state="ready",stream="s"} 1`,
		`statecast_player_stream_state{state="error",stream="s"} 0`)
	page := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/status", nil)
	req.Header.Set("Accept", "text/html")
	tp.p.StatusHandler().ServeHTTP(page, req)
	if body := page.Body.String(); !strings.Contains(body, `<span class="ok state">ready</span>`) ||
		!strings.Contains(body, `class="last-error">`) || strings.Contains(body, `class="last-error">none`) {
		t.Errorf("status page once records flow again: not ready, or no last error:\n%s", body)
	}

	waitFor(t, 60*time.Second, "the connected client got the new records", func() bool { return c.Applied() >= last })
	select {
	case err := <-sessionErr:
		t.Fatalf("the client's stream ended during the outage: %v", err)
	default:
	}
	cancel()
	if err := <-sessionErr; err != nil {
		t.Errorf("session: %v", err)
	}
	e.check()
}
